package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// runIdentity runs link, unlink and resolve: cross-device identity.
func runIdentity(name, usage string, nargs int) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		var d dataFlags
		fs := newFlagSet(name, stderr,
			usage,
			"",
		)
		d.register(fs)
		if !parsePositional(fs, args, nargs, nargs) {
			return 2
		}
		c, err := d.connect(stderr)
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl %s: %v\n", name, err)
			return 1
		}
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), d.timeout+3e9)
		defer cancel()
		device := fs.Arg(0)
		out := map[string]any{"device": device}
		var text string
		switch name {
		case "link":
			n, err := c.Link(ctx, device, fs.Arg(1))
			if err != nil {
				fmt.Fprintf(stderr, "fcapctl link: %v\n", err)
				return 1
			}
			out["viewer"], out["merged"] = fs.Arg(1), n
			text = fmt.Sprintf("%s now counts as %s (%d of its impressions merged)", device, fs.Arg(1), n)
		case "unlink":
			was, err := c.Unlink(ctx, device)
			if err != nil {
				fmt.Fprintf(stderr, "fcapctl unlink: %v\n", err)
				return 1
			}
			out["was"] = was
			text = fmt.Sprintf("%s counts as itself again (it was linked to %q)", device, was)
			if was == "" {
				text = fmt.Sprintf("%s was not linked", device)
			}
		case "resolve":
			v, err := c.Resolve(ctx, device)
			if err != nil {
				fmt.Fprintf(stderr, "fcapctl resolve: %v\n", err)
				return 1
			}
			out["viewer"] = v
			text = fmt.Sprintf("%s counts as %s", device, v)
		}
		if d.asJSON {
			b, _ := json.Marshal(out)
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintln(stdout, text)
		}
		return 0
	}
}
