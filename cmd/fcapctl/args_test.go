package main

import (
	"flag"
	"io"
	"slices"
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
