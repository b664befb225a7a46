package hostile_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fcap-io/fcap/proto"
)

// rawConn is a data-plane connection that speaks frames by hand, so it
// can send what no client would.
type rawConn struct {
	t *testing.T
	net.Conn
	r *proto.Reader
	// last is when the connection was dialed or last read a frame.
	last time.Time
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, Conn: c, r: proto.NewReader(c, 64<<20), last: time.Now()}
}

// send writes b, failing the test if the node does not take it in time.
func (c *rawConn) send(b []byte) {
	c.t.Helper()
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next reads the next frame within the deadline.
func (c *rawConn) next(within time.Duration) (proto.Header, []byte, error) {
	c.SetReadDeadline(time.Now().Add(within))
	h, body, err := c.r.Next()
	if err == nil {
		c.last = time.Now()
	}
	return h, body, err
}

// expectError reads the next frame and fails unless it is an Error of
// code for request id.
func (c *rawConn) expectError(id uint64, code proto.Code) *proto.Error {
	c.t.Helper()
	h, body, err := c.next(10 * time.Second)
	if err != nil {
		c.t.Fatalf("want an error of code %v for request %d, read: %v", code, id, err)
	}
	var e proto.Error
	if h.Type != proto.TypeError || proto.Decode(body, &e) != nil {
		c.t.Fatalf("want an error of code %v for request %d, got a %v frame", code, id, h.Type)
	}
	if e.Code != code || h.ID != id {
		c.t.Fatalf("want an error of code %v for request %d, got %v for %d", code, id, &e, h.ID)
	}
	return &e
}

// expectClosed reads until the node closes the connection, failing if
// it is still open after within. Frames before the close are allowed
// (the error saying why) and returned.
func (c *rawConn) expectClosed(within time.Duration) []proto.Header {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var got []proto.Header
	for {
		c.SetReadDeadline(deadline)
		h, _, err := c.r.Next()
		switch {
		case err == nil, errors.Is(err, proto.ErrUnsupportedVersion):
			got = append(got, h)
			continue
		case isClosed(err):
			return got
		default:
			c.t.Fatalf("connection still open %v after the attack (read: %v)", within, err)
			return nil
		}
	}
}

// expectRefused expects the node to close the connection, having said
// why with a bad-request error unless the close overtook it (a node that
// closes with unread input resets the connection, which may discard
// the error before it is read).
func (c *rawConn) expectRefused(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		c.SetReadDeadline(deadline)
		h, body, err := c.r.Next()
		if err != nil {
			if !isClosed(err) {
				c.t.Fatalf("connection still open %v after the attack (read: %v)", within, err)
			}
			return
		}
		var e proto.Error
		if h.Type != proto.TypeError || proto.Decode(body, &e) != nil || e.Code != proto.CodeBadRequest {
			c.t.Fatalf("want a bad-request error before the close, got a %v frame", h.Type)
		}
	}
}

// ping checks the connection still works: a Ping is answered by a Pong.
func (c *rawConn) ping(id uint64) {
	c.t.Helper()
	if err := c.pingErr(id); err != nil {
		c.t.Fatal(err)
	}
}

// pingErr is ping for a goroutine other than the test's: it returns what
// went wrong, saying how long after the last exchange the ping was sent
// (a node closes a connection idle for its idle timeout).
func (c *rawConn) pingErr(id uint64) error {
	b, err := proto.AppendFrame(nil, id, &proto.Ping{})
	if err != nil {
		return err
	}
	quiet := time.Since(c.last)
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("ping %d after the attack, %v after the last exchange: write: %w", id, quiet.Round(time.Millisecond), err)
	}
	h, _, err := c.next(10 * time.Second)
	if err != nil || h.Type != proto.TypePong || h.ID != id {
		return fmt.Errorf("ping %d after the attack, %v after the last exchange: %v frame for %d, %v", id, quiet.Round(time.Millisecond), h.Type, h.ID, err)
	}
	return nil
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// frame encodes m as a well-formed frame.
func frame(t *testing.T, id uint64, m proto.Message) []byte {
	t.Helper()
	b, err := proto.AppendFrame(nil, id, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawFrame builds a frame by hand: any length, version, type and body.
func rawFrame(length uint32, version byte, typ proto.Type, id uint64, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, length)
	b = append(b, version, byte(typ), 0, 0)
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, body...)
}

// bodyFrame is a frame of the right length around an arbitrary body.
func bodyFrame(typ proto.Type, id uint64, body []byte) []byte {
	return rawFrame(uint32(proto.HeaderSize-4+len(body)), proto.Version, typ, id, body)
}

// msgpackBody encodes vs as one msgpack array: a message body built
// field by field, free of the limits proto's encoder applies.
func msgpackBody(t *testing.T, vs ...any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(vs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkBody is a Check's body: viewer, time, caps, refs and ends as the
// wire carries them (refs and ends as little-endian bins).
func checkBody(t *testing.T, viewer string, caps [][]any, refs []uint16, ends []uint32) []byte {
	t.Helper()
	rb := make([]byte, 0, 2*len(refs))
	for _, r := range refs {
		rb = binary.LittleEndian.AppendUint16(rb, r)
	}
	eb := make([]byte, 0, 4*len(ends))
	for _, e := range ends {
		eb = binary.LittleEndian.AppendUint32(eb, e)
	}
	return msgpackBody(t, viewer, int64(1000), caps, rb, eb, false)
}

// isClosed reports whether err is the peer closing the connection (not
// a read deadline passing).
func isClosed(err error) bool {
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded) &&
		(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err))
}
