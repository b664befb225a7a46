package regions

// The echo floor of the region benchmarks: every latency they report
// stands beside a bare echo of the same size measured in the same run
// (the house rule; cmd/fcapbench --floor is the same idea for one
// cluster). The echo server is fcapbench's own ("fcapbench echo-server",
// a process of its own, as the nodes are): a request frame's first 4
// body bytes name its answer's body size, and it answers at once. The
// caller here sends frames the size of fcap's request and reads the
// answer the size of fcap's answer, on connections of its own, one call
// at a time per connection.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// startEcho starts "fcapbench echo-server" on a free loopback port and
// returns its address; the process ends with the test (its stdin
// closes: --stdin-eof).
func startEcho(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(cluster.Tool(t, "fcapbench"), "echo-server", "--addr", "127.0.0.1:0", "--stdin-eof")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the echo server: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	addr := make(chan string, 1)
	go func() { // ends when the child's stdout does
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "echo listening on "); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the echo server exited before listening")
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("the echo server did not listen within 30s")
		return ""
	}
}

// echoSize is the size of a request frame and of its answer's body.
type echoSize struct {
	typ          proto.Type
	body, answer int
}

// frameSize returns the body sizes of fcap's request m and of its answer
// a, as the client would encode them.
func frameSize(t testing.TB, m, a proto.Message) echoSize {
	t.Helper()
	fm, err := proto.AppendFrame(nil, 0, m)
	if err != nil {
		t.Fatal(err)
	}
	fa, err := proto.AppendFrame(nil, 0, a)
	if err != nil {
		t.Fatal(err)
	}
	return echoSize{typ: m.Type(), body: max(len(fm)-proto.HeaderSize, 4), answer: max(len(fa)-proto.HeaderSize, 4)}
}

// recordSize is the size of a Record of one soft impression for viewer
// and its RecordResult: a probe's write.
func recordSize(t testing.TB, viewer, id string, cp fcap.Cap) echoSize {
	imp := fcap.Impression{ID: id, Time: time.Now().UnixMilli(), Caps: []fcap.Cap{cp}}
	return frameSize(t,
		&proto.Record{Items: []proto.RecordItem{{Viewer: viewer, Impression: imp, HasTime: true}}},
		&proto.RecordResult{Epoch: 1 << 20, Results: []proto.ItemResult{{Status: fcap.Recorded}}})
}

// checkSize is the size of a Check of candidates candidates of one cap
// each (distinct caps) for viewer, and its CheckResult.
func checkSize(t testing.TB, viewer string, cp fcap.Cap, candidates int) echoSize {
	var chk proto.Check
	chk.Viewer, chk.Now, chk.HasNow = viewer, time.Now().UnixMilli(), true
	res := proto.CheckResult{Epoch: 1 << 20, Now: chk.Now}
	for i := range candidates {
		c := cp
		c.ID = fmt.Sprintf("%s-%03d", cp.ID, i)
		chk.Table.Caps = append(chk.Table.Caps, c)
		chk.Table.Refs = append(chk.Table.Refs, uint16(i))
		chk.Table.Ends = append(chk.Table.Ends, uint32(i+1))
		res.Verdicts = append(res.Verdicts, fcap.Verdict{Allowed: true, Remaining: cp.Limit - 1, Blocking: -1})
		res.Left = append(res.Left, uint16(min(cp.Limit, 0xFFFF)))
	}
	return frameSize(t, &chk, &res)
}

// echoFrame builds an echo request of size s with request id id.
func echoFrame(s echoSize, id uint64) []byte {
	f := make([]byte, proto.HeaderSize+s.body)
	binary.BigEndian.PutUint32(f[:4], uint32(proto.HeaderSize-4+s.body))
	f[4] = proto.Version
	f[5] = byte(s.typ)
	binary.BigEndian.PutUint64(f[8:], id)
	binary.BigEndian.PutUint32(f[proto.HeaderSize:], uint32(s.answer))
	return f
}

var errEchoAnswer = errors.New("echo: the answer does not match the request")

// echoConn is one connection to the echo server, one call at a time.
type echoConn struct {
	nc  net.Conn
	r   *proto.Reader
	req []byte
	id  uint64
}

func dialEcho(addr string, s echoSize) (*echoConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("echo: %w", err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &echoConn{nc: nc, r: proto.NewReader(nc, proto.DefaultMaxFrame), req: echoFrame(s, 0)}, nil
}

// call sends one request and waits for its answer, at most timeout.
func (c *echoConn) call(timeout time.Duration) error {
	c.id++
	binary.BigEndian.PutUint64(c.req[8:], c.id)
	c.nc.SetDeadline(time.Now().Add(timeout))
	if _, err := c.nc.Write(c.req); err != nil {
		return err
	}
	hdr, _, err := c.r.Next()
	if err != nil {
		return err
	}
	if hdr.ID != c.id {
		return errEchoAnswer
	}
	return nil
}

// latencyHist is a concurrent-safe histogram of durations, microseconds
// from 1 us to 10 minutes, 3 significant digits.
type latencyHist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram // guarded by mu
}

func newLatencyHist() *latencyHist {
	return &latencyHist{h: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)}
}

func (l *latencyHist) add(d time.Duration) {
	us := max(int64(d/time.Microsecond), 1)
	l.mu.Lock()
	l.h.RecordValue(min(us, l.h.HighestTrackableValue()))
	l.mu.Unlock()
}

func (l *latencyHist) count() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.TotalCount()
}

// ms returns the q-th percentile (0-100) in milliseconds.
func (l *latencyHist) ms(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.h.ValueAtQuantile(q)) / 1000
}

func (l *latencyHist) maxMS() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.h.Max()) / 1000
}

// summary is "p50 X ms, p99 Y ms, max Z ms (n N)".
func (l *latencyHist) summary() string {
	return fmt.Sprintf("p50 %.2f ms, p99 %.2f ms, max %.2f ms (n %d)", l.ms(50), l.ms(99), l.maxMS(), l.count())
}

// echoLoad calls an echo server at a steady rate from a pool of
// connections, open loop: a call whose turn comes while every
// connection is busy is skipped and counted, never queued (a queue
// would measure this generator, not the echo).
type echoLoad struct {
	lat     *latencyHist
	errs    atomic.Int64
	skipped atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

// startEchoLoad calls addr rate times a second with frames of size s,
// over at most conns connections, until stopLoad; each call's deadline is
// timeout (a call past it counts as an error).
func startEchoLoad(t testing.TB, addr string, s echoSize, rate float64, conns int, timeout time.Duration) *echoLoad {
	t.Helper()
	l := &echoLoad{lat: newLatencyHist(), stop: make(chan struct{})}
	pool := make(chan *echoConn, conns)
	warm := make(chan error, conns)
	for range conns {
		c, err := dialEcho(addr, s)
		if err != nil {
			t.Fatal(err)
		}
		pool <- c
		// One call each before the clock starts: a proxy in between
		// dials its upstream at a connection's first bytes.
		go func() { warm <- c.call(time.Minute) }()
	}
	for range conns {
		if err := <-warm; err != nil {
			t.Fatalf("echo: warm-up call: %v", err)
		}
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			for range conns {
				(<-pool).nc.Close()
			}
		}()
		paceAt(l.stop, rate, func() {
			var c *echoConn
			select {
			case c = <-pool:
			default:
				l.skipped.Add(1)
				return
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				start := time.Now()
				if err := c.call(timeout); err != nil {
					l.errs.Add(1)
					c.nc.Close()
					if nc, err := dialEcho(addr, s); err == nil {
						c = nc
					}
				} else {
					l.lat.add(time.Since(start))
				}
				pool <- c
			}()
		})
	}()
	return l
}

// stopLoad ends the calls and waits for those under way.
func (l *echoLoad) stopLoad() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// paceAt calls f rate times a second on a fixed schedule until stop
// closes, waking every millisecond at most and releasing the calls due
// since (an open loop's schedule, not a closed loop's).
func paceAt(stop <-chan struct{}, rate float64, f func()) {
	if rate <= 0 {
		<-stop
		return
	}
	start := time.Now()
	every := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(max(time.Millisecond, min(every, 10*time.Millisecond)))
	defer tick.Stop()
	var done int64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		due := int64(time.Since(start) / every)
		for ; done < due; done++ {
			f()
		}
	}
}
