package client

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// BenchmarkCheckCPU: the client's CPU for a 100-candidate check without
// the network: building the request table and encoding its caps (reset),
// encoding the frame,
// decoding the node's answer and copying it into the reused result
// (fill). The candidates are those of fcapbench's check workload, one
// soft campaign cap each, drawn anew into the same slice every call.
// "warm" draws them from 1,000 caps, which stay in the CPU's caches;
// "cold" from 1M (about 100 MB with their ids), at random, so that
// reading a cap is a cache miss, as in an ad server whose candidates come
// from a large catalogue and whose caches the network stack has just
// flushed.
//
//	go test -run XXX -bench BenchmarkCheckCPU -count 5 ./client/
//
// The /prepared cases build the same requests from candidates prepared
// once (PreparedCandidate, CheckPreparedInto's table).
func BenchmarkCheckCPU(b *testing.B) {
	b.Run("warm", func(b *testing.B) { benchCheckCPU(b, 1000, false, false) })
	b.Run("cold", func(b *testing.B) { benchCheckCPU(b, 1<<20, true, false) })
	b.Run("warm/prepared", func(b *testing.B) { benchCheckCPU(b, 1000, false, true) })
	b.Run("cold/prepared", func(b *testing.B) { benchCheckCPU(b, 1<<20, true, true) })
}

func benchCheckCPU(b *testing.B, ncaps int, random, prepare bool) {
	const candidates = 100
	caps := make([]fcap.Cap, ncaps)
	for i := range caps {
		caps[i] = fcap.Cap{Scope: "campaign", ID: fmt.Sprint("campaign-", i), Limit: 5, Window: 24 * time.Hour}
	}
	var catalogue []PreparedCandidate
	if prepare {
		catalogue = make([]PreparedCandidate, ncaps)
		for i := range caps {
			p, err := PrepareCandidate(fcap.Candidate{Caps: caps[i : i+1]})
			if err != nil {
				b.Fatal(err)
			}
			catalogue[i] = p
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	answer := &proto.CheckResult{Epoch: 42, Now: 1_700_000_000_000, Verdicts: make([]fcap.Verdict, candidates), Left: make([]uint16, candidates)}
	for i := range answer.Verdicts {
		answer.Verdicts[i] = fcap.Verdict{Allowed: true, Remaining: 4, Blocking: -1}
		answer.Left[i] = 4
	}
	resp, err := proto.AppendFrame(nil, 1, answer)
	if err != nil {
		b.Fatal(err)
	}
	hdr := proto.Header{Version: proto.Version, Type: proto.TypeCheckResult, ID: 1}
	cands, res := make([]fcap.Candidate, candidates), &CheckResult{}
	picked := make([]PreparedCandidate, candidates)
	cl := getCall(proto.TypeCheckResult)
	var frame []byte
	b.ReportAllocs()
	cpu := processCPU()
	for i := 0; b.Loop(); i++ {
		for j := range cands {
			k := (i*7 + j*13) % len(caps)
			if random {
				k = rng.IntN(len(caps))
			}
			if prepare {
				picked[j] = catalogue[k]
			} else {
				cands[j] = fcap.Candidate{Caps: caps[k : k+1]}
			}
		}
		var err error
		if prepare {
			err = res.resetPrepared(picked)
		} else {
			err = res.reset(cands)
		}
		if err != nil {
			b.Fatal(err)
		}
		req := proto.Check{Viewer: "viewer-123456", Now: 1_700_000_000_000 + int64(i), HasNow: true, Table: res.table, Encoded: &res.caps, Budget: 4_500_000}
		if frame, err = proto.AppendFrame(frame[:0], uint64(i), &req); err != nil {
			b.Fatal(err)
		}
		cl.deliver(hdr, resp[proto.HeaderSize:])
		<-cl.done
		if cl.err != nil || !res.fill(&cl.check) {
			b.Fatal(cl.err)
		}
	}
	if cpu > 0 {
		b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	}
}
