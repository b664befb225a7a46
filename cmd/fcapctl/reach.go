package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
)

// firstContact is how long a node asked for the topology may take to
// answer. A node answers in well under a millisecond; an HTTP server or
// another protocol's peer never answers an fcap frame (an HTTP server
// waits for a request line), so it is recognised after this long rather
// than after the command's whole deadline.
const firstContact = time.Second

// seedAnswer is what one seed said to a topology request.
type seedAnswer struct {
	addr string
	topo *proto.Topology
	err  error
}

// reach asks every address at once for the cluster's topology and
// returns the first answer. When none answers it says, per address,
// why: refused, silent, an HTTP server, or a peer speaking something
// else. Strings are copied out of the frame.
func reach(ctx context.Context, a *rpc.Admin, addrs []string) (*proto.Topology, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan seedAnswer, len(addrs))
	var wg sync.WaitGroup
	for _, addr := range addrs {
		addr = strings.TrimSpace(addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := askTopology(ctx, a, addr)
			if err != nil {
				err = diagnose(ctx, addr, err)
			}
			answers <- seedAnswer{addr, t, err}
		}()
	}
	defer wg.Wait() // cancelled asks return at once
	var errs []string
	for range addrs {
		ans := <-answers
		if ans.err == nil {
			return ans.topo, nil
		}
		errs = append(errs, ans.err.Error())
	}
	if len(errs) == 1 {
		return nil, errors.New(errs[0])
	}
	return nil, fmt.Errorf("no node answered: %s", strings.Join(errs, "; "))
}

// topology is reach under the name the admin commands use.
func topology(ctx context.Context, a *rpc.Admin, addrs []string) (*proto.Topology, error) {
	return reach(ctx, a, addrs)
}

func askTopology(ctx context.Context, a *rpc.Admin, addr string) (*proto.Topology, error) {
	ctx, cancel := context.WithTimeout(ctx, firstContact)
	defer cancel()
	var t proto.Topology
	if err := a.Call(ctx, addr, &proto.TopologyRequest{}, &t); err != nil {
		return nil, err
	}
	for i := range t.Members {
		m := &t.Members[i]
		m.Name, m.Addr, m.HTTPAddr = strings.Clone(m.Name), strings.Clone(m.Addr), strings.Clone(m.HTTPAddr)
	}
	t.Members = append([]proto.Member(nil), t.Members...)
	t.Owners = append([]uint16(nil), t.Owners...)
	return &t, nil
}

// diagnose rewrites a failed first contact with addr into what an
// operator can act on. A node's own refusal (an Error answer: a bad
// token, say) and a refused or unroutable connection pass through;
// silence or a frame that is not fcap is probed with an HTTP request.
func diagnose(ctx context.Context, addr string, err error) error {
	var answered *proto.Error
	if errors.As(err, &answered) {
		return fmt.Errorf("%s refused the request: %w", addr, err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("cannot connect to %s: %v", addr, op.Err)
	}
	silent := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
	garbled := errors.Is(err, proto.ErrFrameTooLarge) || errors.Is(err, proto.ErrFrameTooShort) ||
		errors.Is(err, proto.ErrUnsupportedVersion) || strings.Contains(err.Error(), "tls:")
	if !silent && !garbled {
		return err
	}
	switch head := probeHTTP(ctx, addr); {
	case bytes.HasPrefix(head, []byte("HTTP/")):
		return fmt.Errorf("%s is an HTTP server, not an fcap data plane: is it a node's --http port? (give --addr the node's --data address, 7700 by default)", addr)
	case len(head) >= 2 && head[0] == 0x15 && head[1] == 0x03: // a TLS alert record
		return fmt.Errorf("%s serves TLS: give --tls-ca (and --tls-cert and --tls-key if it asks for a client certificate)", addr)
	case len(head) > 0:
		return fmt.Errorf("%s does not speak the fcap protocol (it answered %q)", addr, head)
	case silent:
		return fmt.Errorf("%s accepted the connection but did not answer within %v: not an fcap data plane, or a node that is stuck", addr, firstContact)
	}
	return fmt.Errorf("%s does not speak the fcap protocol: %w", addr, err)
}

// probeHTTP sends an HTTP request to addr and returns the first bytes of
// the answer, nil when nothing came within firstContact.
func probeHTTP(ctx context.Context, addr string) []byte {
	ctx, cancel := context.WithTimeout(ctx, firstContact)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	if _, err := io.WriteString(c, "HEAD / HTTP/1.0\r\nUser-Agent: fcapctl\r\n\r\n"); err != nil {
		return nil
	}
	buf := make([]byte, 16)
	n, _ := io.ReadAtLeast(c, buf, 5)
	return bytes.TrimRight(buf[:n], "\r\n")
}
