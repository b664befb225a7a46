package engine

import (
	"strconv"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

// The names table holds at most MaxNames names, whatever callers send.
func TestNamesAreBounded(t *testing.T) {
	var tb names
	for i := range MaxNames + 100 {
		c := fcap.Cap{Scope: "campaign", ID: "c" + strconv.Itoa(i), Limit: 1, Window: time.Second}
		tb.note(c.Key(), &c)
	}
	if n := tb.n.Load(); n != MaxNames {
		t.Fatalf("%d names remembered, want the bound %d", n, MaxNames)
	}
	c := fcap.Cap{Scope: "campaign", ID: "c0", Limit: 1, Window: time.Second}
	e := &Engine{}
	e.names.note(c.Key(), &c)
	e.names.note(c.Key(), &c)
	if got, ok := e.CounterName(c.Key()); !ok || got != "campaign:c0" || e.names.n.Load() != 1 {
		t.Fatalf("CounterName = %q, %v (%d stored)", got, ok, e.names.n.Load())
	}
}
