package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrebuilt: a binary in FCAP_TEST_BIN is used only when it is the
// program asked for, built with the race setting asked for; a missing one
// is built as without the folder.
func TestPrebuilt(t *testing.T) {
	// A stand-in fcapd: a program whose import path ends in /fcapd,
	// built without the race detector.
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/cmd/fcapd\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	norace := filepath.Join(dir, "fcapd-norace")
	build := exec.Command("go", "build", "-o", norace, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	t.Setenv(BinEnv, "")
	if _, ok, err := Prebuilt("fcapd", false); ok || err != nil {
		t.Errorf("%s unset: ok %v, err %v; want neither", BinEnv, ok, err)
	}

	t.Setenv(BinEnv, dir)
	if path, ok, err := Prebuilt("fcapd", false); !ok || err != nil || path != norace {
		t.Errorf("fcapd without -race: %q, ok %v, err %v; want %s", path, ok, err, norace)
	}
	if _, ok, err := Prebuilt("fcapctl", false); ok || err != nil {
		t.Errorf("fcapctl, absent: ok %v, err %v; want neither (the caller builds it)", ok, err)
	}
	if _, ok, err := Prebuilt("fcapd", true); ok || err != nil {
		t.Errorf("race-built fcapd, absent: ok %v, err %v; want neither", ok, err)
	}

	// The non-race build where the race-built one belongs.
	copyFile(t, norace, filepath.Join(dir, "fcapd"))
	if _, ok, err := Prebuilt("fcapd", true); ok || err == nil || !strings.Contains(err.Error(), "-race=false, want -race=true") {
		t.Errorf("fcapd built without -race, asked with: ok %v, err %v; want a -race error", ok, err)
	}
	// Another program under fcapctl's name.
	copyFile(t, norace, filepath.Join(dir, "fcapctl"))
	if _, ok, err := Prebuilt("fcapctl", false); ok || err == nil || !strings.Contains(err.Error(), "want a build of .../fcapctl") {
		t.Errorf("fcapd under fcapctl's name: ok %v, err %v; want an error naming the program", ok, err)
	}
	// Not a Go binary at all.
	if err := os.WriteFile(filepath.Join(dir, "fcapbench"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Prebuilt("fcapbench", false); ok || err == nil {
		t.Errorf("a shell script as fcapbench: ok %v, err %v; want an error", ok, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
