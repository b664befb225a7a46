package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// runErase erases one viewer (a privacy request): its counters, impression
// ids, reservations and device links, on its owner and every backup, kept
// erased across restarts by a logged tombstone.
func runErase(args []string, stdout, stderr io.Writer) int {
	var d dataFlags
	fs := newFlagSet("erase", stderr,
		"usage: fcapctl erase [flags] VIEWER",
		"\nForget VIEWER everywhere (a privacy request): every counter, impression id,",
		"reservation and device link, on its owner and backups, for good. Safe to repeat;",
		"after an error, erase again to finish.",
		"",
	)
	d.register(fs)
	if !parsePositional(fs, args, 1, 1) {
		return 2
	}
	viewer := fs.Arg(0)
	c, err := d.connect(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl erase: %v\n", err)
		return 1
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout+3e9)
	defer cancel()
	if err := c.Erase(ctx, viewer); err != nil {
		fmt.Fprintf(stderr, "fcapctl erase: %v\n", err)
		return 1
	}
	if d.asJSON {
		b, _ := json.Marshal(map[string]any{"viewer": viewer, "erased": true})
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "%s erased\n", viewer)
	}
	return 0
}
