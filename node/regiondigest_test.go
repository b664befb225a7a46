package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// TestRegionDigestHandler: only a peer may ask for a region's lane
// digests; a node answers the digest of the origin's lane of each
// viewer of the partition, equal to the origin's own digest once it
// merged the origin's state (whatever lanes of other regions and
// counters of its own the viewer holds) and different before; it refuses its own
// region's name, a bad one, another partition count and bad keys, and
// a second digest while one runs.
func TestRegionDigestHandler(t *testing.T) {
	cfg := DefaultLocalConfig("region-b")
	cfg.HTTPAddr = ""
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Security.Tokens = map[string]security.Role{"adserver-token-0001": security.RoleAdServer, "peer-token-00000001": security.RolePeer}
	cfg.Security.PeerToken = "peer-token-00000001"
	cfg.Region.Name = "b"
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	waitOwns(t, n)

	a, err := engine.New(engine.DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 5, Window: time.Hour}
	now := time.Now().UnixMilli()
	key := fcap.ViewerKey("v")
	if _, err := a.Record("v", fcap.Impression{ID: "i1", Time: now, Caps: []fcap.Cap{c}}); err != nil {
		t.Fatal(err)
	}
	digestOf := func() (uint64, *proto.RegionDigest) {
		var keys []uint64
		d := a.LocalDigest(key, now, func(kh uint64) { keys = append(keys, kh) })
		slices.Sort(keys)
		parts := n.view.Load().ring.Partitions()
		return d, &proto.RegionDigest{Origin: "a", Now: now, Partitions: uint32(parts), Partition: uint32(ring.PartitionOf(key, parts)), Keys: keys}
	}
	peer := helloAs(t, n, "peer-token-00000001")
	ask := func(req *proto.RegionDigest) (uint64, error) {
		t.Helper()
		hdr, body := request(t, req)
		out := peer.handle(nil, hdr, body)
		if _, err := answer(t, out); err != nil {
			return 0, err
		}
		var res proto.RegionDigestResult
		if err := proto.Decode(out[proto.HeaderSize:], &res); err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Digests {
			if d.Key == key {
				return d.Sum, nil
			}
		}
		return 0, nil
	}
	want, req := digestOf()
	ad := helloAs(t, n, "adserver-token-0001")
	if err := callAs(t, ad, req, proto.TypeRegionDigestResult); !errors.Is(err, proto.ErrPermissionDenied) {
		t.Errorf("region digest from an ad server: %v, want permission denied", err)
	}
	if got, err := ask(req); err != nil || got != 0 {
		t.Fatalf("before any merge: digest %x, %v; want none", got, err)
	}
	merge := &proto.RegionMerge{Region: "a", HighWater: now, States: a.ExportLocal(key, nil)}
	if err := callAs(t, peer, merge, proto.TypeRegionMergeResult); err != nil {
		t.Fatal(err)
	}
	// Region c's lane of the same cap, and b's own counter of it: not
	// a's, so not in a's digest.
	cEng, err := engine.New(engine.DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*engine.Engine{cEng, n.engine} {
		if _, err := e.Record("v", fcap.Impression{ID: "other", Time: now - 1, Caps: []fcap.Cap{c}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := callAs(t, peer, &proto.RegionMerge{Region: "c", HighWater: now, States: cEng.ExportLocal(key, nil)}, proto.TypeRegionMergeResult); err != nil {
		t.Fatal(err)
	}
	if got, err := ask(req); err != nil || got != want || want == 0 {
		t.Fatalf("after the merge: digest %x, %v; want a's own %x", got, err, want)
	}
	if _, err := a.Record("v", fcap.Impression{ID: "i2", Time: now, Caps: []fcap.Cap{c}}); err != nil {
		t.Fatal(err)
	}
	want2, req2 := digestOf()
	if got, err := ask(req2); err != nil || got == want2 {
		t.Fatalf("a counted more: digest %x, %v; a's own %x", got, err, want2)
	}

	for name, spoil := range map[string]func(m *proto.RegionDigest){
		"own region":      func(m *proto.RegionDigest) { m.Origin = "b" },
		"bad name":        func(m *proto.RegionDigest) { m.Origin = "Bad_Name" },
		"partition count": func(m *proto.RegionDigest) { m.Partitions, m.Partition = 7, 0 },
	} {
		bad := *req
		spoil(&bad)
		if _, err := ask(&bad); !errors.Is(err, proto.ErrBadRequest) {
			t.Errorf("%s: %v, want a bad request", name, err)
		}
	}
	// Keys out of order, forged past the encoder: the two keys' bytes
	// swapped (the last field) is still a list of uint64s.
	twoKeys := *req
	twoKeys.Keys = []uint64{1, 2}
	hdr, body := request(t, &twoKeys)
	forged := append([]byte(nil), body...)
	copy(forged[len(forged)-16:], []byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0})
	if _, err := answer(t, peer.handle(nil, hdr, forged)); !errors.Is(err, proto.ErrBadRequest) {
		t.Errorf("keys out of order: %v, want a bad request", err)
	}
	release, ok := n.region.DigestSlot()
	if !ok {
		t.Fatal("the digest slot is taken")
	}
	if _, err := ask(req); !errors.Is(err, proto.ErrOverloaded) {
		t.Errorf("a digest while another runs: %v, want overloaded", err)
	}
	release()
	if _, err := ask(req); err != nil {
		t.Errorf("once the other is done: %v", err)
	}
}
