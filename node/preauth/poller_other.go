//go:build !linux

package preauth

import (
	"errors"

	"github.com/fcap-io/fcap/node/conns"
)

// Poller is Linux's only.
type Poller struct{}

// New reports errors.ErrUnsupported: connections are served a goroutine
// each from their connect.
func New(Config) (*Poller, error) { return nil, errors.ErrUnsupported }

// Add never watches a connection here.
func (p *Poller) Add(*conns.Conn, int, bool) bool { return false }

// Run returns.
func (p *Poller) Run() {}

// Stop does nothing.
func (p *Poller) Stop() {}
