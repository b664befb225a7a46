package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/fcap-io/fcap/node/buildinfo"
)

// runVersion prints fcapctl's build.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseArgs(fs, args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	i := buildinfo.Get()
	if *asJSON {
		b, _ := json.Marshal(i)
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	fmt.Fprintln(stdout, "fcapctl "+i.String())
	return exitOK
}
