package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/test/conformance"
)

// runConformance runs case files and ends with "N passed, M failed".
func runConformance(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fcapctl conformance [flags] FILE.json...")
		fmt.Fprintln(stderr, "\nRuns shared/conformance case files against the in-process engine and")
		fmt.Fprintln(stderr, "prints each failing case, then \"N passed, M failed\". Exit status 1 if any failed.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	factory := conformance.Engine(engine.DefaultLocalConfig())
	var total conformance.Result
	for _, path := range fs.Args() {
		f, err := conformance.Load(path)
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl conformance: %v\n", err)
			return 2
		}
		r := f.Run(factory)
		for _, fail := range r.Failures {
			fmt.Fprintf(stdout, "%s: %s\n", path, fail)
		}
		total.Passed += r.Passed
		total.Failed += r.Failed
	}
	fmt.Fprintln(stdout, total.Summary())
	if total.Failed > 0 {
		return 1
	}
	return 0
}
