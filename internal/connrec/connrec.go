// Package connrec is a net.Conn for tests that keeps what each Write
// carried, so that a test can count the system calls a sender would
// have made and read back the frames they held.
package connrec

import (
	"net"
	"slices"
	"sync"
	"time"
)

// Conn records writes. Only Write, SetWriteDeadline and Close may be
// called: the embedded net.Conn is nil.
type Conn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte // guarded by mu
}

// Write keeps a copy of b.
func (c *Conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, slices.Clone(b))
	return len(b), nil
}

// SetWriteDeadline does nothing: a recorded write never blocks.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }

// Close does nothing.
func (c *Conn) Close() error { return nil }

// Writes returns what each Write carried, in order.
func (c *Conn) Writes() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}
