package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// watchdog dumps every goroutine's stack when a load worker's request
// (a check and maybe an Allow, so two deadlines) has run past
// 2*deadline+over: the stack of the stuck worker shows where the client
// overran its deadline. At most max dumps. Enabled by -chaos.stacks.
type watchdog struct {
	dir      string
	limit    time.Duration
	max      int
	started  []atomic.Int64 // per worker: request start, UnixNano, 0 when idle
	dumps    int
	lastDump time.Time
}

func newWatchdog(dir string, workers int, limit time.Duration) *watchdog {
	return &watchdog{dir: dir, limit: limit, max: 5, started: make([]atomic.Int64, workers)}
}

func (w *watchdog) begin(i int) {
	if w != nil {
		w.started[i].Store(time.Now().UnixNano())
	}
}

func (w *watchdog) end(i int) {
	if w != nil {
		w.started[i].Store(0)
	}
}

func (w *watchdog) run(ctx context.Context, logf func(string, ...any)) *sync.WaitGroup {
	return every(ctx, 5*time.Millisecond, func(now time.Time) {
		if w.dumps >= w.max || now.Sub(w.lastDump) < time.Second {
			return
		}
		for i := range w.started {
			s := w.started[i].Load()
			if s == 0 || now.Sub(time.Unix(0, s)) < w.limit {
				continue
			}
			// The header's m=+ reading is on the same clock as the
			// monotonic part of the deadlines in the stacks.
			buf := make([]byte, 8<<20)
			head := fmt.Appendf(nil, "now %v, worker %d started %v ago\n\n", time.Now(), i, now.Sub(time.Unix(0, s)))
			buf = append(head, buf[:runtime.Stack(buf, true)]...)
			path := filepath.Join(w.dir, fmt.Sprintf("stacks-%d.txt", w.dumps))
			if err := os.WriteFile(path, buf, 0o644); err == nil {
				logf("worker %d running for %v: goroutines dumped to %s", i, now.Sub(time.Unix(0, s)), path)
			}
			w.dumps++
			w.lastDump = now
			return
		}
	})
}
