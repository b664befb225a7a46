package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestFlagsAfterArguments(t *testing.T) {
	for _, c := range []struct {
		in   []string
		addr string
		json bool
		pos  []string
	}{
		{[]string{"install", "KEY", "--addr", "a:1"}, "a:1", false, []string{"install", "KEY"}},
		{[]string{"u1", "campaign:c1:3:1h", "--json"}, "d:1", true, []string{"u1", "campaign:c1:3:1h"}},
		{[]string{"list", "--json", "--addr=a:1"}, "a:1", true, []string{"list"}},
		{[]string{"--addr", "a:1", "use", "KEY", "-json"}, "a:1", true, []string{"use", "KEY"}},
		{[]string{"remove", "--", "--json"}, "d:1", false, []string{"remove", "--json"}},
		{[]string{"u1", "--json", "c:1:1:1", "--timeout", "3s"}, "d:1", true, []string{"u1", "c:1:1:1"}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		addr := fs.String("addr", "d:1", "")
		asJSON := fs.Bool("json", false, "")
		fs.Duration("timeout", 0, "")
		if err := parseArgs(fs, c.in); err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if *addr != c.addr || *asJSON != c.json || !slices.Equal(fs.Args(), c.pos) {
			t.Errorf("%q: addr %q json %v args %q, want %q %v %q", c.in, *addr, *asJSON, fs.Args(), c.addr, c.json, c.pos)
		}
	}
}

// TestTrailingJSONIsAFlag: "allow u1 CAP --json" once read --json as a
// second cap.
func TestTrailingJSONIsAFlag(t *testing.T) {
	code, _, errOut := runCLI("allow", "--addr", "127.0.0.1:1", "u1", "campaign:c1:3:1h", "--json")
	if code == 2 {
		t.Fatalf("trailing --json refused as usage: %s", errOut)
	}
}

// TestCapWhereAnIDGoes: "record u7 CAP CAP" took the first CAP as the
// impression id and recorded it on the second cap only. A VIEWER or
// IMPRESSION-ID shaped like a CAP is refused as usage (exit 2) before
// anything is sent; an id with colons that is no CAP is taken.
func TestCapWhereAnIDGoes(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"record", "u7", "campaign:c1:3:24h", "creative:k1:2:1h"}, `IMPRESSION-ID "campaign:c1:3:24h" is a CAP; usage: fcapctl record [flags] VIEWER IMPRESSION-ID CAP...`},
		{[]string{"void", "--time", "5", "u7", "campaign:c1:3:24h", "creative:k1:2:1h"}, `IMPRESSION-ID "campaign:c1:3:24h" is a CAP`},
		{[]string{"allow", "campaign:c1:3:24h", "creative:k1:2:1h"}, `VIEWER "campaign:c1:3:24h" is a CAP; usage: fcapctl allow [flags] VIEWER CAP...`},
		{[]string{"reserve", "campaign:c1:3:24h", "creative:k1:2:1h"}, `VIEWER "campaign:c1:3:24h" is a CAP`},
	} {
		code, _, errOut := runCLI(append(c.args, "--addr", "127.0.0.1:1")...)
		if code != exitUsage || !strings.Contains(errOut, c.says) {
			t.Errorf("fcapctl %s: exit %d, %q; want exit 2 saying %q", strings.Join(c.args, " "), code, errOut, c.says)
		}
	}
	// Not a CAP (no limit and window): an id like any other, so the
	// command goes on to the (unreachable) cluster.
	if code, _, errOut := runCLI("record", "--addr", "127.0.0.1:1", "--timeout", "200ms", "u7", "imp:2026:eu", "campaign:c1:3:24h"); code == exitUsage {
		t.Errorf("an id with colons refused as usage: %s", errOut)
	}
}
