package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// The echo target is the machine's floor: a separate process that reads
// fcap frames and answers each at once with a frame of the size a node's
// answer would have, doing nothing else. A request's body says how long
// its answer's body is (its first 4 bytes, big-endian); the rest is
// padding that makes the request as long as fcap's. Whatever a node adds
// to that round trip (decoding, the engine, its goroutines, its GC) is
// what fcap's latency over the echo's measures.

// maxEchoAnswer bounds the answer body a request may ask for: the most a
// node's answer could be (a frame is at most proto.DefaultMaxFrame).
const maxEchoAnswer = proto.DefaultMaxFrame - proto.HeaderSize

// echoSizeField is how many leading body bytes name the answer's size.
const echoSizeField = 4

var errEchoRequest = errors.New("echo: request body too short to name its answer's size")

// echoAnswerSize reads the answer size a request body asks for.
func echoAnswerSize(body []byte) (int, error) {
	if len(body) < echoSizeField {
		return 0, errEchoRequest
	}
	n := binary.BigEndian.Uint32(body)
	if uint64(n) > maxEchoAnswer {
		return 0, fmt.Errorf("echo: answer of %d bytes asked, at most %d", n, maxEchoAnswer)
	}
	return int(n), nil
}

// appendEchoFrame appends a frame of type t and request id id whose body
// is body bytes long: the first echoSizeField of them hold answer (for a
// request), the rest are zero.
func appendEchoFrame(dst []byte, t proto.Type, id uint64, body, answer int) []byte {
	var hdr [proto.HeaderSize]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(proto.HeaderSize-4+body))
	hdr[4] = proto.Version
	hdr[5] = byte(t)
	binary.BigEndian.PutUint64(hdr[8:], id)
	dst = slices.Grow(dst, proto.HeaderSize+body)
	dst = append(dst, hdr[:]...)
	start := len(dst)
	dst = dst[:start+body]
	clear(dst[start:])
	if answer >= 0 && body >= echoSizeField {
		binary.BigEndian.PutUint32(dst[start:], uint32(answer))
	}
	return dst
}

// echoServer answers echo requests on every connection it accepts.
type echoServer struct {
	ln net.Listener
	// work is the CPU spent on each request before it is answered (0 for
	// the bare floor): with a node's own handling time it is the floor
	// of a server that does as much work per request (--work).
	work time.Duration
	wg   sync.WaitGroup // the accept loop and one per connection

	mu sync.Mutex
	// The fields below are guarded by mu.
	conns  map[net.Conn]struct{}
	closed bool
}

// newEchoServer serves ln until Close.
func newEchoServer(ln net.Listener, work time.Duration) *echoServer {
	s := &echoServer{ln: ln, work: work, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *echoServer) Addr() string { return s.ln.Addr().String() }

func (s *echoServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(nc)
	}
}

// serve answers a connection's requests in order, flushing once no
// further request is buffered (as a node does). A frame it cannot
// answer closes the connection: the echo never guesses.
func (s *echoServer) serve(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
		nc.Close()
	}()
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	r := proto.NewReader(nc, proto.DefaultMaxFrame)
	w := bufio.NewWriterSize(nc, 64<<10)
	var out []byte
	for {
		hdr, body, err := r.Next()
		if err != nil {
			return
		}
		n, err := echoAnswerSize(body)
		if err != nil {
			return
		}
		spin(s.work)
		out = appendEchoFrame(out[:0], answerType(hdr.Type), hdr.ID, n, -1)
		if _, err := w.Write(out); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
		if cap(out) > 1<<16 { // do not keep one large answer's buffer
			out = nil
		}
	}
}

// maxEchoWork bounds the work an echo spends per request or per call:
// a stand-in for a node's or a client's CPU, not a way to stall a run.
const maxEchoWork = 10 * time.Millisecond

// spin keeps the CPU busy for d (wall time, as a handler would be: time
// the host or the kernel takes from the thread meanwhile counts).
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// answerType is the type a node answers a request type with: the next
// one (requests and responses come in pairs).
func answerType(t proto.Type) proto.Type { return t + 1 }

// Close stops accepting, closes every connection and waits for their
// goroutines. Safe to call twice.
func (s *echoServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// runEchoServer is "fcapbench echo-server": serve until SIGINT or
// SIGTERM, or until stdin ends with --stdin-eof (fcapbench starts its own
// echo process that way, so it never outlives the run).
func runEchoServer(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fcapbench echo-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0: any free port; the address is printed)")
	stdinEOF := fs.Bool("stdin-eof", false, "exit when stdin reaches its end (the parent that started it is gone)")
	work := fs.Duration("work", 0, "spend this long on the CPU for each request before answering it: the floor of a server doing that much work per request (0: the bare floor)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fcapbench echo-server: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *work < 0 || *work > maxEchoWork {
		fmt.Fprintf(stderr, "fcapbench echo-server: need 0 <= --work <= %v, got %v\n", maxEchoWork, *work)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench echo-server: %v\n", err)
		return 1
	}
	s := newEchoServer(ln, *work)
	defer s.Close()
	fmt.Fprintf(stdout, "echo listening on %s\n", s.Addr())
	done := make(chan struct{})
	if *stdinEOF {
		go func() { // ends with the process
			io.Copy(io.Discard, os.Stdin)
			close(done)
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-sig:
	case <-done:
	}
	return 0
}
