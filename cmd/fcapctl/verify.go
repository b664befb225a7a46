package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/fcap-io/fcap/node/wal"
)

// runVerify reconciles a live cluster (no argument: every node's
// counters against its replicas and its log) or checks a stopped node's
// data dir offline (DATA_DIR: every log segment's records and every
// snapshot's checksums; it changes nothing, and a node starting on the
// dir truncates what it reports as damaged).
func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify", stderr,
		"usage: fcapctl verify [flags]           reconcile a running cluster",
		"       fcapctl verify DATA_DIR          check a stopped node's --data-dir",
		"\nLive: every node digests what each viewer of its partitions counts at one",
		"instant, from RAM and from what its snapshot and log replay to; the owners",
		"of each partition are compared with each other and each node with its log.",
		"A difference that stays unchanged over two settle intervals is drift; exit",
		"status 1 on drift or an unreachable node. Needs an operator token on",
		"secured clusters. Replaying a log takes memory for the copy while it runs.",
		"Offline: checks the log and snapshots; exit status 1 if anything is damaged.",
	)
	addr := fs.String("addr", "127.0.0.1:7700", "live: data-plane address of any node (comma-separated for several)")
	timeout := fs.Duration("timeout", 2*time.Minute, "live: deadline of the whole command (replaying a large log takes a while)")
	settle := fs.Duration("settle", 2*time.Second, "live: how long a difference must stay unchanged to count as drift (twice this is waited)")
	noLog := fs.Bool("no-log", false, "live: compare replicas only, do not replay the nodes' logs")
	show := fs.Int("show", 20, "live: drifting viewers to list")
	asJSON := fs.Bool("json", false, "print JSON")
	conn := addConnFlags(fs)
	if err := parseArgs(fs, args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		admin, err := conn.admin()
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl verify: %v\n", err)
			return 2
		}
		return runVerifyLive(verifyOpts{addrs: strings.Split(*addr, ","), admin: admin, settle: *settle, noLog: *noLog, show: *show, timeout: *timeout}, *asJSON, stdout, stderr)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	dir := fs.Arg(0)
	status := 0
	segs, err := wal.VerifySegments(filepath.Join(dir, "wal"))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl: %v\n", err)
		return 1
	}
	type segOut struct {
		Segment string `json:"segment"`
		Records int64  `json:"records"`
		Bytes   int64  `json:"bytes"`
		Damaged int64  `json:"damaged_bytes"`
		Error   string `json:"error,omitempty"`
	}
	type snapOut struct {
		Snapshot string `json:"snapshot"`
		States   uint64 `json:"states"`
		From     uint64 `json:"replay_from_segment"`
		Error    string `json:"error,omitempty"`
	}
	var out struct {
		Records  int64     `json:"records"`
		Bytes    int64     `json:"bytes"`
		Segments []segOut  `json:"segments"`
		Snaps    []snapOut `json:"snapshots"`
		OK       bool      `json:"ok"`
	}
	out.Segments, out.Snaps = []segOut{}, []snapOut{}
	for _, s := range segs {
		out.Records += s.Records
		out.Bytes += s.Bytes
		so := segOut{Segment: filepath.Base(s.Path), Records: s.Records, Bytes: s.Bytes, Damaged: s.Damaged}
		if s.Damaged > 0 {
			status = 1
			so.Error = fmt.Sprint(s.Err)
			if !*asJSON {
				fmt.Fprintf(stdout, "DAMAGED %s: %d records good, %d bytes damaged from offset %d: %v\n", so.Segment, s.Records, s.Damaged, s.Bytes, s.Err)
			}
		}
		out.Segments = append(out.Segments, so)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "log: %d segments, %d records, %d bytes\n", len(segs), out.Records, out.Bytes)
	}
	snaps, err := wal.Snapshots(filepath.Join(dir, "snapshots"))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl: %v\n", err)
		return 1
	}
	for _, s := range snaps {
		n, err := wal.VerifySnapshot(s.Path)
		so := snapOut{Snapshot: filepath.Base(s.Path), States: n, From: s.From}
		if err != nil {
			status = 1
			so.Error = err.Error()
			if !*asJSON {
				fmt.Fprintf(stdout, "DAMAGED snapshot %s: %v\n", so.Snapshot, err)
			}
		} else if !*asJSON {
			fmt.Fprintf(stdout, "snapshot %s: %d states, replay continues at segment %d\n", so.Snapshot, n, s.From)
		}
		out.Snaps = append(out.Snaps, so)
	}
	out.OK = status == 0
	if *asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
	} else if status == 0 {
		fmt.Fprintln(stdout, "ok")
	}
	return status
}
