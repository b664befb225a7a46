package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/fcap-io/fcap"
)

// runVoid takes a recorded impression back (invalid-traffic refunds): it
// stops counting on every cap it was recorded against, on its owner and
// every backup, and a later record of its id does not count.
func runVoid(args []string, stdout, stderr io.Writer) int {
	var d dataFlags
	fs := newDataFlagSet("void", "usage: fcapctl void [flags] --time T VIEWER IMPRESSION-ID CAP...\n\n"+
		"Takes back an impression recorded for VIEWER (invalid traffic): it stops counting on\n"+
		"every cap, on its owner and backups, and is not counted again if recorded later.\n"+
		"Name it as it was recorded: its id, --time (required; `fcapctl record` prints it)\n"+
		"and its CAPs. Safe to repeat; after an error, void again to finish.", stderr, &d)
	at := fs.Int64("time", 0, "when the impression played, Unix ms, as it was recorded (required)")
	c, cand, code := d.start("void", fs, args, 2, stderr)
	if c == nil {
		return code
	}
	defer c.Close(context.Background())
	if *at == 0 || d.device {
		fmt.Fprintln(stderr, "fcapctl void: --time is required (the impression's recorded time), and VIEWER must be the viewer it was recorded for (no --device)")
		return exitUsage
	}
	viewer, id := fs.Arg(0), fs.Arg(1)
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout+3*time.Second)
	defer cancel()
	voided, err := c.Void(ctx, viewer, fcap.Impression{ID: id, Time: *at, Caps: cand.Caps})
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl void: %v\n", err)
		return exitError
	}
	switch {
	case d.asJSON:
		b, _ := json.Marshal(map[string]any{"viewer": viewer, "id": id, "voided": voided})
		fmt.Fprintln(stdout, string(b))
	case voided:
		fmt.Fprintf(stdout, "voided %s for %s\n", id, viewer)
	default:
		fmt.Fprintf(stdout, "%s was not recorded for %s: nothing taken back; it will not count if it arrives\n", id, viewer)
	}
	return exitOK
}
