package wal

import (
	"fmt"
	"os"
	"testing"
)

func writeSnap(t *testing.T, dir string, from uint64, payloads ...string) string {
	t.Helper()
	w, err := CreateSnapshot(dir, from)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		w.Add([]byte(p))
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return snapPath(dir, from)
}

func TestSnapshotRoundTripAndDamage(t *testing.T) {
	dir := t.TempDir()
	path := writeSnap(t, dir, 3, "a", "b", "c")
	writeSnap(t, dir, 9, "x")
	os.WriteFile(snapPath(dir, 12)+tmpExt, []byte("half"), 0o644)
	snaps, err := Snapshots(dir)
	if err != nil || len(snaps) != 2 || snaps[0].From != 9 || snaps[1].From != 3 {
		t.Fatalf("snapshots %v %v", snaps, err)
	}
	if _, err := os.Stat(snapPath(dir, 12) + tmpExt); !os.IsNotExist(err) {
		t.Fatal("an unfinished snapshot was not removed")
	}
	var got []string
	n, err := LoadSnapshot(path, func(p []byte) { got = append(got, string(p)) })
	if err != nil || n != 3 || fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("loaded %v (%d) %v", got, n, err)
	}
	good, _ := os.ReadFile(path)
	for name, bad := range map[string][]byte{
		"truncated":  good[:len(good)-1],
		"no trailer": good[:len(good)-(headerSize+len(snapEnd)+8)],
		"bit flip":   func() []byte { b := append([]byte(nil), good...); b[30] ^= 1; return b }(),
		"appended":   append(append([]byte(nil), good...), 0),
	} {
		os.WriteFile(path, bad, 0o644)
		applied := 0
		if _, err := LoadSnapshot(path, func([]byte) { applied++ }); err == nil || applied != 0 {
			t.Errorf("%s: loaded (%d applied), err %v", name, applied, err)
		}
	}
}
