package wanproxy

// The life of one proxied connection: a reader and a writer per
// direction, the chunks between them stamped with their release time.

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// chunkSize is the most one read takes from a sender.
const chunkSize = 32 << 10

// queueLen is how many chunks a direction of a connection holds between
// its reader and its writer: past it the reader stops reading and the
// sender's kernel buffers fill, as behind a slow link.
const queueLen = 64

// serve dials the upstream and runs both directions until each has
// ended.
func (p *Proxy) serve(front net.Conn) {
	defer p.wg.Done()
	defer p.open.Add(-1)
	defer p.untrack(front)
	upstream, ok := p.waitUpstream()
	if !ok {
		return
	}
	back, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(back) {
		return
	}
	defer p.untrack(back)
	p.mu.Lock()
	rewrite := p.rewrite
	p.mu.Unlock()
	var dirs sync.WaitGroup
	dirs.Add(2)
	go func() {
		defer dirs.Done()
		p.pipe(Forward, front, back, rewrite[Forward])
	}()
	go func() {
		defer dirs.Done()
		p.pipe(Reverse, back, front, rewrite[Reverse])
	}()
	dirs.Wait()
}

// chunk is what one read returned, and when it may be written out.
type chunk struct {
	b       []byte
	release time.Time
	eof     bool // the sender closed its side cleanly: no b
}

// pipe carries one direction of a connection, src to dst, until src
// ends (then dst gets a FIN once everything before it was written) or
// either side fails (then both close, ending the other direction too).
func (p *Proxy) pipe(d Dir, src, dst net.Conn, rewrite func(io.Reader) io.Reader) {
	var r io.Reader = src
	if rewrite != nil {
		r = rewrite(src)
	}
	q := make(chan chunk, queueLen)
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		p.read(d, r, q, stop)
	}()
	if !p.write(d, dst, q) {
		src.Close()
		dst.Close()
	}
	close(stop)
	reader.Wait()
	// Whatever the writer did not take is gone with the connection.
	for c := range q {
		p.pending[d].Add(-int64(len(c.b)))
	}
}

// read reads chunks from src, stamps each with its release time and
// queues it; it closes q when src ends, after an eof chunk if it ended
// cleanly.
func (p *Proxy) read(d Dir, src io.Reader, q chan<- chunk, stop <-chan struct{}) {
	defer close(q)
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c := chunk{b: bytes.Clone(buf[:n]), release: p.releaseAt(d, time.Now())}
			p.pending[d].Add(int64(n))
			select {
			case q <- c:
			case <-stop:
				p.pending[d].Add(-int64(n))
				return
			}
		}
		if errors.Is(err, io.EOF) {
			select {
			case q <- chunk{eof: true, release: p.releaseAt(d, time.Now())}:
			case <-stop:
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// releaseAt returns when a chunk read at now may leave: after the
// direction's latency, its jitter and, if the chunk is lost, a
// retransmission timeout. The one writer of a direction takes chunks in
// the order they were read, so a chunk whose time comes before its
// predecessor's leaves right after it: jitter never reorders, and a lost
// chunk holds back everything behind it, as in TCP.
func (p *Proxy) releaseAt(d Dir, now time.Time) time.Time {
	p.mu.Lock()
	l, other := p.links[d], p.links[1-d]
	p.mu.Unlock()
	delay := l.Latency
	if l.Jitter > 0 {
		delay += time.Duration(rand.Int64N(2*int64(l.Jitter)+1)) - l.Jitter
	}
	delay = max(delay, 0)
	if l.Loss > 0 && rand.Float64() < l.Loss {
		delay += rto(l, other)
	}
	return now.Add(delay)
}

// write writes the queued chunks to dst as their time comes, the
// bandwidth allows and no cut holds them. It reports false when dst
// failed, the proxy closed, or src ended with an error (passed on, once
// no cut holds it, by closing both sides); true after a clean end passed
// on as a FIN.
func (p *Proxy) write(d Dir, dst net.Conn, q <-chan chunk) bool {
	for c := range q {
		if !p.sleepUntil(c.release) || !p.waitHealed() {
			return false
		}
		if c.eof {
			cw, ok := dst.(interface{ CloseWrite() error })
			return ok && cw.CloseWrite() == nil
		}
		for off := 0; off < len(c.b); {
			if !p.waitHealed() {
				return false
			}
			n, wait := p.reserve(d, len(c.b)-off)
			if !p.sleepUntil(time.Now().Add(wait)) {
				return false
			}
			if _, err := dst.Write(c.b[off : off+n]); err != nil {
				return false
			}
			off += n
			p.forwarded[d].Add(int64(n))
			p.pending[d].Add(-int64(n))
		}
	}
	p.waitHealed() // a cut hides a reset too
	return false
}

// reserve takes up to want bytes' worth of tokens from direction d's
// bucket (at most the bucket's size at a time) and returns how many
// bytes it took and how long to wait before writing them.
func (p *Proxy) reserve(d Dir, want int) (int, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.links[d]
	if l.Bandwidth == 0 {
		return want, 0
	}
	burst := l.burst()
	n := int(min(int64(want), burst))
	b := &p.buckets[d]
	now := time.Now()
	rate := float64(l.Bandwidth)
	b.tokens = min(b.tokens+now.Sub(b.last).Seconds()*rate, float64(burst))
	b.last = now
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return n, 0
	}
	return n, time.Duration(-b.tokens / rate * float64(time.Second))
}

// sleepUntil waits until t; it reports false when the proxy closed
// first.
func (p *Proxy) sleepUntil(t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-p.done:
		return false
	}
}

// waitUpstream waits until the proxy has an upstream and returns it; ok
// is false when the proxy closed first.
func (p *Proxy) waitUpstream() (upstream string, ok bool) {
	for {
		p.mu.Lock()
		upstream, changed := p.upstream, p.changed
		p.mu.Unlock()
		if upstream != "" {
			return upstream, true
		}
		select {
		case <-changed:
		case <-p.done:
			return "", false
		}
	}
}

// waitHealed waits while the proxy is cut; it reports false when the
// proxy closed first.
func (p *Proxy) waitHealed() bool {
	for {
		p.mu.Lock()
		cut, changed := p.cut, p.changed
		p.mu.Unlock()
		if !cut {
			return true
		}
		select {
		case <-changed:
		case <-p.done:
			return false
		}
	}
}
