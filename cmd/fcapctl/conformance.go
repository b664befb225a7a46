package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/test/conformance"
)

// runConformance runs case files and ends with "N passed, M failed".
func runConformance(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("conformance", stderr,
		"usage: fcapctl conformance [flags] FILE.json...",
		"\nRuns shared/conformance case files against the in-process engine, or a running",
		"cluster with --addr (each case on fresh viewer ids), and prints each failing",
		"case, then \"N passed, M failed\". Exit status 1 if any failed.",
	)
	addr := fs.String("addr", "", "run against the cluster of this data-plane address (host:port) instead of an in-process engine")
	timeout := fs.Duration("timeout", 100*time.Millisecond, "with --addr: deadline of each call")
	asJSON := fs.Bool("json", false, `print {"passed","failed","failures":[{"file","case","op","detail"}]}`)
	conn := addConnFlags(fs)
	offset := fs.String("offset", "now", `with --addr: added to every tick; "now" (the current Unix millisecond) keeps the cases' times near a live cluster's clock`)
	if !parsePositional(fs, args, 1, -1) {
		return 2
	}
	factory := conformance.Engine(engine.DefaultLocalConfig())
	if *addr != "" {
		var off int64
		if *offset == "now" {
			off = time.Now().UnixMilli()
		} else if _, err := fmt.Sscan(*offset, &off); err != nil {
			fmt.Fprintf(stderr, "fcapctl conformance: --offset %q: want \"now\" or an integer\n", *offset)
			return 2
		}
		admin, err := conn.admin()
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl conformance: %v\n", err)
			return exitUsage
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := dialCluster(ctx, admin, splitAddrs(*addr), *timeout, stderr)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl conformance: %v\n", err)
			return exitError
		}
		defer c.Close(context.Background())
		factory = conformance.Cluster(c, fmt.Sprintf("fcapctl-conformance-%d-", time.Now().UnixNano()), off)
	}
	type failureOut struct {
		File   string `json:"file"`
		Case   string `json:"case"`
		Op     int    `json:"op"`
		Detail string `json:"detail"`
	}
	failures := []failureOut{}
	var total conformance.Result
	for _, path := range fs.Args() {
		f, err := conformance.Load(path)
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl conformance: %v\n", err)
			return 2
		}
		r := f.Run(factory)
		for _, fail := range r.Failures {
			if !*asJSON {
				fmt.Fprintf(stdout, "%s: %s\n", path, fail)
			}
			failures = append(failures, failureOut{path, fail.Case, fail.Op, fail.Detail})
		}
		total.Passed += r.Passed
		total.Failed += r.Failed
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"passed": total.Passed, "failed": total.Failed, "failures": failures})
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintln(stdout, total.Summary())
	}
	if total.Failed > 0 {
		return 1
	}
	return 0
}
