package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVoidTakesARecordedImpressionBack: fcapctl void of an impression
// recorded with fcapctl record gives its slot back, says so, is safe to
// repeat, refuses an impression named with another time, and refuses a
// void without --time before sending anything.
func TestVoidTakesARecordedImpressionBack(t *testing.T) {
	nodes := startNodes(t, 1)
	addr := nodes[0].DataAddr()
	const c = "campaign:void-c:2:1h"
	at := strconv.FormatInt(time.Now().UnixMilli(), 10)
	remaining := func() int64 {
		t.Helper()
		code, out, errOut := runCLI("check", "--addr", addr, "--json", "u1", c)
		var vs []struct{ Remaining int64 }
		if code != exitOK || json.Unmarshal([]byte(out), &vs) != nil || len(vs) != 1 {
			t.Fatalf("check: exit %d, %s %s", code, out, errOut)
		}
		return vs[0].Remaining
	}
	if code, _, errOut := runCLI("record", "--addr", addr, "--time", at, "u1", "imp-1", c); code != exitOK {
		t.Fatalf("record: exit %d: %s", code, errOut)
	}
	if n := remaining(); n != 1 {
		t.Fatalf("%d left after one impression, want 1", n)
	}
	for range 2 { // the second is a no-op with the same answer
		code, out, errOut := runCLI("void", "--addr", addr, "--time", at, "u1", "imp-1", c)
		if code != exitOK || !strings.Contains(out, "voided imp-1 for u1") {
			t.Fatalf("void: exit %d, %q %s", code, out, errOut)
		}
		if n := remaining(); n != 2 {
			t.Fatalf("%d left after the void, want the whole 2", n)
		}
	}
	// Recording it again (a retry) does not bring it back.
	if code, _, errOut := runCLI("record", "--addr", addr, "--time", at, "u1", "imp-1", c); code != exitOK {
		t.Fatalf("record again: exit %d: %s", code, errOut)
	}
	if n := remaining(); n != 2 {
		t.Fatalf("%d left after the voided id was recorded again, want 2", n)
	}

	if code, _, errOut := runCLI("record", "--addr", addr, "--time", at, "u1", "imp-2", c); code != exitOK {
		t.Fatalf("record: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("void", "--addr", addr, "--time", "1000", "u1", "imp-2", c); code != exitError || !strings.Contains(errOut, "not those it was recorded with") {
		t.Errorf("void at another time: exit %d, %s; want %d and the mismatch named", code, errOut, exitError)
	}
	if code, _, _ := runCLI("void", "--addr", addr, "u1", "imp-2", c); code != exitUsage {
		t.Errorf("void without --time: exit %d, want %d", code, exitUsage)
	}
	if n := remaining(); n != 1 {
		t.Errorf("%d left after refused voids, want 1 (imp-2 still counts)", n)
	}
}
