package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/proto"
)

// runRegion runs a region subcommand: retire.
func runRegion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "retire" {
		fmt.Fprintln(stderr, "usage: fcapctl region retire [flags] NAME")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return exitOK
		}
		return exitUsage
	}
	return runRetire(args[1:], stdout, stderr)
}

// runRetire retires a peer region lost for good on every member of this
// region.
func runRetire(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("region retire", stderr,
		"usage: fcapctl region retire [flags] NAME",
		"\nRetires NAME, a peer region lost for good, on every member of this region:",
		"its link stops, its requests are refused, and its shares of strict caps go",
		"to the remaining regions once its last grants and loans aged out (twice a",
		"cap's window after the retire). Run it in each remaining region. It asserts",
		"that NAME grants nothing any more: a region that still serves would overshoot",
		"with it, so a region a member's link reaches now is refused unless --force.",
		"A member without a data dir forgets it when the whole region restarts: run",
		"it again then (safe: the shares move later).",
		exitCodesHelp,
	)
	var nf nodeFlags
	nf.register(fs, 10*time.Second)
	force := fs.Bool("force", false, "retire NAME even if a member's link reaches it now")
	if !parsePositional(fs, args, 1, 1) {
		return exitUsage
	}
	name := fs.Arg(0)
	if err := region.ValidName(name); err != nil {
		fmt.Fprintf(stderr, "fcapctl region retire: %v\n", err)
		return exitUsage
	}
	admin, err := nf.conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl region retire: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), nf.timeout)
	defer cancel()
	topo, err := topology(ctx, admin, splitAddrs(nf.addr))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl region retire: %v\n", err)
		return exitError
	}
	msg, code := retireOnMembers(ctx, admin, topo, name, *force)
	if code == exitOK {
		fmt.Fprintln(stdout, msg)
	} else {
		fmt.Fprintln(stderr, "fcapctl region retire: "+msg)
	}
	return code
}

// retireOnMembers asks the members in turn until one retires name (or
// refuses it: that member's answer is the region's), then the others,
// forced: the decision is made, and gossip would bring it to them
// anyway.
func retireOnMembers(ctx context.Context, admin adminCaller, topo *proto.Topology, name string, force bool) (string, int) {
	var first *proto.RetireRegionResult
	var by string
	var unreached, warnings []string
	for _, m := range topo.Members {
		var res proto.RetireRegionResult
		err := admin.Call(ctx, m.Addr, &proto.RetireRegion{Region: name, Force: force || first != nil}, &res)
		switch {
		case err == nil && first == nil:
			first, by = &res, m.Name
		case err == nil:
		case first == nil && errors.Is(err, proto.ErrBadRequest):
			return fmt.Sprintf("%s refused: %v", m.Name, err), exitError
		case first == nil:
			unreached = append(unreached, fmt.Sprintf("%s: %v", m.Name, err))
		default:
			warnings = append(warnings, fmt.Sprintf("%s: %v (it learns the retire by gossip)", m.Name, err))
		}
	}
	if first == nil {
		return "no member answered: " + strings.Join(unreached, "; "), exitError
	}
	since := time.UnixMilli(first.AtMillis).UTC().Format(time.RFC3339Nano)
	msg := fmt.Sprintf("region %s retired since %s (by %s's clock)", name, since, by)
	if !first.New {
		msg = fmt.Sprintf("region %s was already retired, since %s (by %s's clock)", name, since, by)
	}
	msg += "; its shares of a strict cap go to the remaining regions twice the cap's window later"
	if len(warnings) > 0 {
		msg += "\nnot reached: " + strings.Join(warnings, "; ")
	}
	return msg, exitOK
}
