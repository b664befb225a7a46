package fcap

import (
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestViewerKey: a viewer's key is the xxhash of its id, which the ring
// routes by and the engine stores under, and never 0, which marks a free
// slot in the engine.
func TestViewerKey(t *testing.T) {
	for _, v := range []string{"", "viewer-1", "ünïcode", "a much longer viewer id with spaces", string(make([]byte, 200))} {
		if got, want := ViewerKey(v), xxhash.Sum64String(v); got != want || got == 0 {
			t.Errorf("ViewerKey(%q) = %#x, want %#x, never 0", v, got, want)
		}
	}
}

// TestViewerKeyAllocatesNothing: the key is computed on every request's
// hot path, on the node and in the client's routing.
func TestViewerKeyAllocatesNothing(t *testing.T) {
	v := "viewer-1"
	if n := testing.AllocsPerRun(100, func() { _ = ViewerKey(v) }); n != 0 {
		t.Errorf("ViewerKey allocates %v times a call", n)
	}
}
