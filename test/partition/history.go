// Package partition runs real fcapd processes, each in its own Linux
// network namespace, cuts the links between them (silently: packets are
// dropped, nothing is refused), races strict Allows from ad-server
// clients on every side, and checks the histories: each viewer's strict
// history must be linearizable against a cap of Limit, no viewer may be
// granted more than Limit, no acknowledged grant may be lost, and the
// copies must agree once the cluster settles. See README.md.
//
// The driver (./driver) is the ad server: it runs inside a namespace
// and writes one JSON line per strict Allow (Op). The checker (Check) is
// plain Go and runs anywhere.
package partition

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// Limit is the strict cap every viewer races for: 5 per viewer, in a
// window longer than any test.
const Limit = 5

// Results of one strict Allow.
const (
	// Granted: the cluster answered that the impression was taken.
	Granted = "granted"
	// Refused: the cluster answered that the cap had no room.
	Refused = "refused"
	// Unknown: no answer (an error, a timeout, a fail-closed verdict):
	// the Allow may or may not have taken effect.
	Unknown = "unknown"
	// GivenBack is not an Allow but the client's Undo of a grant that
	// reached it after its call gave up (an Unknown Allow that took
	// effect): the owner took it back, the slot is free again.
	GivenBack = "given-back"
)

// Op is one strict Allow as the driver saw it. Times are Unix
// nanoseconds from the same machine's clock, so histories of drivers in
// different namespaces (processes) interleave correctly.
type Op struct {
	Viewer string `json:"viewer"`
	Side   string `json:"side"`   // the node whose namespace the driver ran in
	Client int    `json:"client"` // the worker within the driver
	Call   int64  `json:"call"`   // invocation
	Return int64  `json:"return"` // response
	Result string `json:"result"` // Granted, Refused, Unknown or GivenBack
	Err    string `json:"err,omitempty"`
}

// ReadOps reads JSON lines of Ops.
func ReadOps(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		switch op.Result {
		case Granted, Refused, Unknown, GivenBack:
		default:
			return nil, fmt.Errorf("history line %d: result %q", line, op.Result)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}
