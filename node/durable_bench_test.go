package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/wal"
	"github.com/fcap-io/fcap/proto"
)

// BenchmarkHandleAllowDurable: Allow through the handler (no network),
// 8 concurrent connections on distinct viewers, memory only and with a
// data dir under each fsync policy. Under "always" the connections share
// fsyncs (group commit); each waits for its own.
func BenchmarkHandleAllowDurable(b *testing.B) {
	caps := []fcap.Cap{
		{Scope: "creative", ID: "cr-1", Limit: 5, Window: time.Second},
		{Scope: "campaign", ID: "cmp-1", Limit: 5, Window: time.Second},
		{Scope: "advertiser", ID: "adv-1", Limit: 5, Window: time.Second},
	}
	for _, mode := range []string{"memory", "never", "interval", "always", "always-64conns"} {
		b.Run(mode, func(b *testing.B) {
			par := 4 // x GOMAXPROCS connections
			if mode == "always-64conns" {
				mode, par = "always", 64/runtime.GOMAXPROCS(0)
			}
			cfg := DefaultLocalConfig("bench")
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg.Engine.MemoryLimit = 0
			if mode != "memory" {
				cfg.Storage.DataDir = b.TempDir()
				cfg.Storage.Fsync, _ = wal.ParsePolicy(mode)
			}
			n, err := Start(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { n.Shutdown(context.Background()) })
			var conn atomic.Int64
			b.SetParallelism(par)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := conn.Add(1)
				h := newHandler(n)
				out := make([]byte, 0, 64<<10)
				bodies := make([][]byte, 256)
				var hdr proto.Header
				for i := range bodies {
					m := &proto.Allow{Viewer: fmt.Sprintf("viewer-%d-%d", c, i%16), Now: int64(i * 300), HasNow: true, Caps: caps}
					frame, _ := proto.AppendFrame(nil, 1, m)
					hdr, bodies[i] = proto.Header{Version: proto.Version, Type: m.Type(), ID: 1}, frame[proto.HeaderSize:]
				}
				for i := 0; pb.Next(); i++ {
					out = h.handle(out[:0], hdr, bodies[i&255])
				}
			})
		})
	}
}
