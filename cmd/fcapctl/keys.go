package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// runKeys prints every counter one viewer has on its owners, for support
// tickets ("why was this ad not shown?"). Counters are known to a node by
// a hash of their cap; the CAPs given on the command line name them.
func runKeys(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7700", "data-plane address of any node (comma-separated for several)")
	timeout := fs.Duration("timeout", 5*time.Second, "deadline of the whole command")
	asJSON := fs.Bool("json", false, "print JSON")
	conn := addConnFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fcapctl keys [flags] VIEWER [CAP...]")
		fmt.Fprintln(stderr, "\nEvery counter VIEWER has, with its timestamps or counts, as each of its")
		fmt.Fprintln(stderr, "owners holds it (the primary first: backups may lag by the replication delay).")
		fmt.Fprintln(stderr, "CAPs, given as for check, label the counters they read.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return 2
	}
	viewer := fs.Arg(0)
	labels := map[uint64]string{}
	for _, s := range fs.Args()[1:] {
		c, err := parseCap(s)
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl keys: %v\n", err)
			return 2
		}
		labels[fcap.KeyHash(c)] = c.Scope + ":" + c.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	admin, err := conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl keys: %v\n", err)
		return 2
	}
	cfg := client.DefaultConfig(strings.Split(*addr, ",")...)
	cfg.TLS, cfg.Token = admin.TLS, admin.Token
	c, err := client.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl keys: %v\n", err)
		return 1
	}
	defer c.Close(context.Background())
	if err := c.WaitReady(ctx); err != nil {
		fmt.Fprintf(stderr, "fcapctl keys: cannot reach the cluster at %s: %v\n", *addr, err)
		return 1
	}
	r := c.Ring()
	p, owners := r.Lookup(viewer)
	type ownerOut struct {
		Node  string             `json:"node"`
		Rank  int                `json:"rank"`
		Error string             `json:"error,omitempty"`
		State *proto.ViewerState `json:"state,omitempty"`
	}
	var outs []ownerOut
	for rank, o := range owners {
		m := r.Member(o)
		var st proto.ViewerState
		out := ownerOut{Node: m.Name, Rank: rank}
		if err := admin.Call(ctx, m.Addr, &proto.Inspect{Viewer: viewer}, &st); err != nil {
			out.Error = err.Error()
		} else {
			out.State = &st
		}
		outs = append(outs, out)
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"viewer": viewer, "partition": p, "owners": outs})
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "viewer %q: partition %d\n", viewer, p)
	for _, o := range outs {
		role := "primary"
		if o.Rank > 0 {
			role = fmt.Sprintf("backup %d", o.Rank)
		}
		fmt.Fprintf(stdout, "\n%s (%s)", o.Node, role)
		switch {
		case o.Error != "":
			fmt.Fprintf(stdout, ": unreachable: %s\n", o.Error)
			continue
		case !o.State.Found:
			fmt.Fprintln(stdout, ": holds nothing for this viewer")
			continue
		}
		fmt.Fprintf(stdout, ": %d counters, %d reservations, %d impression ids remembered\n", len(o.State.Keys), o.State.Reservations, o.State.RememberedIDs)
		if o.State.LinkedTo != "" {
			fmt.Fprintf(stdout, "a device linked to %q: checks naming it as a device count against %q\n", o.State.LinkedTo, o.State.LinkedTo)
		}
		if len(o.State.Devices) > 0 {
			fmt.Fprintf(stdout, "devices linked to it: %s\n", strings.Join(o.State.Devices, ", "))
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "COUNTER\tALGORITHM\tLIMIT\tWINDOW\tSTATE")
		for _, k := range o.State.Keys {
			name := labels[k.Hash]
			if name == "" {
				name = fmt.Sprintf("%016x", k.Hash)
			}
			alg := fcap.Algorithm(k.Algorithm)
			state := ""
			switch alg {
			case fcap.Sliding:
				var ts []string
				for _, t := range k.Values {
					ts = append(ts, time.UnixMilli(t).UTC().Format("2006-01-02T15:04:05.000Z"))
				}
				state = fmt.Sprintf("%d impressions: %s", len(k.Values), strings.Join(ts, " "))
			default:
				state = fmt.Sprintf("window %d: counts %v", k.Bucket, k.Values)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\n", name, alg, k.Limit, time.Duration(k.Window)*time.Millisecond, state)
		}
		tw.Flush()
	}
	return 0
}
