package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/fcap-io/fcap/node/buildinfo"
)

// runVersion prints fcapctl's build.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if !parsePositional(fs, args, 0, 0) {
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
