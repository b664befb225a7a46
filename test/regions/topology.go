package regions

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/fcap-io/fcap/proto"
)

// A region link learns the peer region's ring from a seed (a Topology
// answer) and then dials each owner at the data-plane address the ring
// names. On one machine those addresses are the nodes' own, so the link
// would reach the owners around the proxies. The test bed therefore
// rewrites every Topology that crosses a proxy back to the region that
// asked: each member address of the peer region becomes the address of
// the proxy the asking region reaches that member through. It is what a
// deployment does with addresses that differ inside and across regions
// (NAT, a WAN address per node); fcapd itself is unchanged, and TLS on the
// data plane would hide the frames (the bed runs without it).

// addrMap maps a region's real data-plane addresses to the proxies one
// other region reaches them through. Safe for concurrent use: a
// restarted node moves its entry.
type addrMap struct {
	mu sync.Mutex
	// m is guarded by mu.
	m map[string]string
}

func (a *addrMap) set(real, proxy string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]string{}
	}
	for k, v := range a.m {
		if v == proxy {
			delete(a.m, k) // the node moved
		}
	}
	a.m[real] = proxy
}

func (a *addrMap) get(real string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.m[real]
	return p, ok
}

// maxRewriteFrame bounds a frame the rewriter reads: far above what a
// node sends (proto.DefaultMaxFrame unless configured).
const maxRewriteFrame = 64 << 20

// topologyRewriter passes a node's answers through frame by frame,
// rewriting the member addresses of each Topology with addrs.
type topologyRewriter struct {
	src   *bufio.Reader
	addrs *addrMap
	out   []byte // rewritten bytes not yet read
	frame []byte
}

func newTopologyRewriter(src io.Reader, addrs *addrMap) *topologyRewriter {
	return &topologyRewriter{src: bufio.NewReaderSize(src, 64<<10), addrs: addrs}
}

func (r *topologyRewriter) Read(b []byte) (int, error) {
	for len(r.out) == 0 {
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(b, r.out)
	r.out = r.out[n:]
	return n, nil
}

// next reads one frame into r.out, rewritten if it is a Topology. io.EOF
// at a frame's start is a clean end; anything else that stops a frame
// is an error.
func (r *topologyRewriter) next() error {
	var hdr [proto.HeaderSize]byte
	if _, err := io.ReadFull(r.src, hdr[:4]); err != nil {
		return err
	}
	if _, err := io.ReadFull(r.src, hdr[4:]); err != nil {
		return fmt.Errorf("regions: a frame's header: %w", io.ErrUnexpectedEOF)
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < proto.HeaderSize-4 || n > maxRewriteFrame {
		return fmt.Errorf("regions: a frame of length %d", n)
	}
	r.frame = append(append(r.frame[:0], hdr[:]...), make([]byte, int(n)-(proto.HeaderSize-4))...)
	if _, err := io.ReadFull(r.src, r.frame[proto.HeaderSize:]); err != nil {
		return fmt.Errorf("regions: a frame's body: %w", io.ErrUnexpectedEOF)
	}
	if proto.Type(hdr[5]) != proto.TypeTopology {
		r.out = r.frame
		return nil
	}
	var t proto.Topology
	if err := proto.Decode(r.frame[proto.HeaderSize:], &t); err != nil {
		return fmt.Errorf("regions: a topology answer: %w", err)
	}
	for i := range t.Members {
		if p, ok := r.addrs.get(t.Members[i].Addr); ok {
			t.Members[i].Addr = p
		}
	}
	out, err := proto.AppendFrame(nil, binary.BigEndian.Uint64(hdr[8:]), &t)
	if err != nil {
		return fmt.Errorf("regions: re-encoding a topology: %w", err)
	}
	r.out = out
	return nil
}
