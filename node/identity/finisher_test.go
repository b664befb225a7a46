package identity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/proto"
)

// tries is a Try that fails until ok is set, and counts its calls by device.
type tries struct {
	mu    sync.Mutex
	ok    bool
	calls map[string]int
}

func (tr *tries) try(_ context.Context, j Job) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.calls[j.Device]++
	if j.Device == "refused" {
		return &proto.Error{Code: proto.CodeBadRequest, Message: "no"}
	}
	if !tr.ok {
		return proto.ErrOverloaded
	}
	return nil
}

func (tr *tries) count(d string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.calls[d]
}

// TestFinisher: a job whose try failed is run again until it succeeds;
// one refused for good is dropped; one done in line, or refused in line,
// is never run again; and the jobs not finished before a stop are run
// again by the next finisher on the same journal, whatever bytes their
// ids hold, up to a torn last line.
func TestFinisher(t *testing.T) {
	dir := t.TempDir()
	tr := &tries{calls: map[string]int{}}
	f, err := New(Config{Dir: dir, Try: tr.try})
	if err != nil {
		t.Fatal(err)
	}
	begin := func(f *Finisher, j Job) uint64 {
		t.Helper()
		id, err := f.Begin(j)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	if f.End(begin(f, Job{Kind: Link, Device: "done", Viewer: "v"}), nil) {
		t.Error("a job done in line was kept")
	}
	if f.End(begin(f, Job{Kind: Link, Device: "bad", Viewer: "v"}), &proto.Error{Code: proto.CodeBadRequest}) {
		t.Error("a job refused in line was kept")
	}
	binary := "dev\x00\xff\xfe"
	if !f.End(begin(f, Job{Kind: Unlink, Device: binary, Viewer: "v", At: 7}), proto.ErrOverloaded) {
		t.Fatal("a job whose other side was unreachable was dropped")
	}
	f.End(begin(f, Job{Kind: Link, Device: "refused", Viewer: "v"}), errors.New("unreachable"))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	testwait.Eventually(t, 20*time.Second, func() bool { return tr.count(binary) >= 2 && tr.count("refused") >= 1 && f.Unfinished() == 1 }, "the jobs were not run again, or the refused one kept")
	cancel()
	wg.Wait()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn line at the end (a crash mid-write) is ignored.
	jf, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	jf.WriteString(`{"id":99,"kind":1,"dev`)
	jf.Close()

	tr2 := &tries{calls: map[string]int{}, ok: true}
	f2, err := New(Config{Dir: dir, Try: tr2.try})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if n := f2.Unfinished(); n != 1 {
		t.Fatalf("after a restart: %d unfinished jobs, want 1", n)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	wg.Go(func() { f2.Run(ctx2) })
	testwait.Eventually(t, 20*time.Second, func() bool { return f2.Unfinished() == 0 }, "the journaled job was not finished after the restart")
	cancel2()
	wg.Wait()
	if tr2.count(binary) != 1 || tr2.count("done") != 0 || tr2.count("bad") != 0 {
		t.Errorf("after the restart: tries %v, want the unfinished job once", tr2.calls)
	}
	if id := begin(f2, Job{Kind: Link, Device: "x", Viewer: "v"}); id <= 4 {
		t.Errorf("a job begun after the restart has id %d, reused", id)
	}
}

// TestFinisherBound: past MaxPending, Begin refuses.
func TestFinisherBound(t *testing.T) {
	f, err := New(Config{Try: func(context.Context, Job) error { return nil }, MaxPending: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, err := f.Begin(Job{Kind: Link, Device: "d", Viewer: "v"})
		if (err != nil) != (i == 2) {
			t.Errorf("begin %d: %v", i, err)
		}
	}
}
