package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestOpenAPINamesRealFlags: every fcapd flag docs/openapi.yaml names
// exists (its bearer text named --tokens; the flag is --tokens-file).
func TestOpenAPINamesRealFlags(t *testing.T) {
	spec, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, func(string) string { return "" }, &help); err != errHelp {
		t.Fatalf("parseFlags(-h): %v", err)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(help.String(), -1) {
		known[m[1]] = true
	}
	if !known["tokens-file"] || !known["http"] {
		t.Fatalf("read %d flags from fcapd -h, not --tokens-file and --http:\n%s", len(known), help.String())
	}
	named := regexp.MustCompile("`--([a-z0-9-]+)").FindAllStringSubmatch(string(spec), -1)
	if len(named) == 0 {
		t.Fatal("docs/openapi.yaml names no flag")
	}
	for _, m := range named {
		if !known[m[1]] {
			t.Errorf("docs/openapi.yaml names --%s, which fcapd does not have (%s)", m[1], strings.TrimSpace(m[0]))
		}
	}
}

// TestMaxIDLengthFlag: --max-id-length, which the docs and the client's
// Limits refer to, sets the engine's limit.
func TestMaxIDLengthFlag(t *testing.T) {
	o, err := parseFlags([]string{"--max-id-length", "64"}, func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine.MaxIDLength != 64 {
		t.Errorf("--max-id-length 64: Engine.MaxIDLength %d", cfg.Engine.MaxIDLength)
	}
}
