package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// benchNode starts a one-node cluster for driving the request handler
// directly: what the data plane costs per request without the network.
func benchNode(b *testing.B) *Node {
	b.Helper()
	cfg := DefaultLocalConfig("bench")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Engine.MemoryLimit = 0
	n, err := Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Shutdown(context.Background()) })
	return n
}

func frameBody(b *testing.B, m proto.Message) (proto.Header, []byte) {
	frame, err := proto.AppendFrame(nil, 1, m)
	if err != nil {
		b.Fatal(err)
	}
	return proto.Header{Version: proto.Version, Type: m.Type(), ID: 1}, frame[proto.HeaderSize:]
}

// BenchmarkHandleCheck100x3: decode a 100-candidate Check (160 distinct
// caps), run the engine, encode the result. Allocations per request are
// the node's hot-path figure.
func BenchmarkHandleCheck100x3(b *testing.B) {
	n := benchNode(b)
	var t fcap.CheckTable
	index := map[fcap.Cap]uint16{}
	for i := range 100 {
		caps := []fcap.Cap{
			{Scope: "creative", ID: fmt.Sprintf("cr-%d", i), Limit: 3, Window: time.Hour},
			{Scope: "campaign", ID: fmt.Sprintf("cmp-%d", i/2), Limit: 5, Window: 24 * time.Hour},
			{Scope: "advertiser", ID: fmt.Sprintf("adv-%d", i/10), Limit: 20, Window: 7 * 24 * time.Hour},
		}
		n.engine.Record("viewer-1", fcap.Impression{ID: fmt.Sprint(i), Time: int64(i), Caps: caps})
		for _, c := range caps {
			ref, ok := index[c]
			if !ok {
				ref = uint16(len(t.Caps))
				index[c] = ref
				t.Caps = append(t.Caps, c)
			}
			t.Refs = append(t.Refs, ref)
		}
		t.Ends = append(t.Ends, uint32(len(t.Refs)))
	}
	hdr, body := frameBody(b, &proto.Check{Viewer: "viewer-1", Now: 1000, HasNow: true, Table: t})
	h := newHandler(n)
	out := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out = h.handle(out[:0], hdr, body)
	}
}

// BenchmarkHandleAllow: one Allow with a creative, campaign and
// advertiser cap on an existing viewer.
func BenchmarkHandleAllow(b *testing.B) {
	n := benchNode(b)
	caps := []fcap.Cap{
		{Scope: "creative", ID: "cr-1", Limit: 5, Window: time.Second},
		{Scope: "campaign", ID: "cmp-1", Limit: 5, Window: time.Second},
		{Scope: "advertiser", ID: "adv-1", Limit: 5, Window: time.Second},
	}
	h := newHandler(n)
	out := make([]byte, 0, 64<<10)
	bodies := make([][]byte, 1024)
	var hdr proto.Header
	for i := range bodies {
		hdr, bodies[i] = frameBody(b, &proto.Allow{Viewer: "viewer-1", Now: int64(i * 300), HasNow: true, Caps: caps})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out = h.handle(out[:0], hdr, bodies[i&1023])
	}
}

// BenchmarkHandleRecord32: a batch of 32 impressions for one viewer.
func BenchmarkHandleRecord32(b *testing.B) {
	n := benchNode(b)
	caps := []fcap.Cap{{Scope: "campaign", ID: "cmp-1", Limit: 50, Window: time.Second}}
	h := newHandler(n)
	out := make([]byte, 0, 64<<10)
	bodies := make([][]byte, 256)
	var hdr proto.Header
	for i := range bodies {
		var m proto.Record
		for j := range 32 {
			m.Items = append(m.Items, proto.RecordItem{Viewer: fmt.Sprint("viewer-", j), HasTime: true,
				Impression: fcap.Impression{ID: fmt.Sprintf("imp-%d-%d", i, j), Time: int64(i * 100), Caps: caps}})
		}
		hdr, bodies[i] = frameBody(b, &m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out = h.handle(out[:0], hdr, bodies[i&255])
	}
}

// BenchmarkHandleCheckCampaigns100: fcapbench's check workload as the node
// sees it: 100 candidates with one campaign cap each, drawn from 5,000
// campaigns, for many viewers. /fresh: viewers with no counters (the
// engine reads nothing per cap); /seen: each viewer has seen 20 of the
// campaigns, so every cap is looked up in a viewer that holds counters.
func BenchmarkHandleCheckCampaigns100(b *testing.B) {
	for _, seen := range []bool{false, true} {
		name := "fresh"
		if seen {
			name = "seen"
		}
		b.Run(name, func(b *testing.B) {
			n := benchNode(b)
			const viewers, campaigns = 4096, 5000
			bodies := make([][]byte, 256)
			var hdr proto.Header
			for i := range bodies {
				var t fcap.CheckTable
				viewer := fmt.Sprintf("viewer-%d", i*16%viewers)
				for j := range 100 {
					c := fcap.Cap{Scope: "campaign", ID: fmt.Sprintf("campaign-%d", (i*7919+j*53)%campaigns), Limit: 3, Window: 24 * time.Hour}
					if seen && j%5 == 0 {
						n.engine.Record(viewer, fcap.Impression{ID: fmt.Sprintf("imp-%d-%d", i, j), Time: 500, Caps: []fcap.Cap{c}})
					}
					t.Refs = append(t.Refs, uint16(len(t.Caps)))
					t.Caps = append(t.Caps, c)
					t.Ends = append(t.Ends, uint32(len(t.Refs)))
				}
				hdr, bodies[i] = frameBody(b, &proto.Check{Viewer: viewer, Now: 1000, HasNow: true, Table: t})
			}
			h := newHandler(n)
			out := make([]byte, 0, 64<<10)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				out = h.handle(out[:0], hdr, bodies[i&255])
			}
		})
	}
}
