package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/proto"
)

// runKeys prints every counter one viewer has on its owners, for support
// tickets ("why was this ad not shown?"). Counters are known to a node by
// a hash of their cap; a node names those it created (engine.MaxNames of
// them) and the CAPs given on the command line name the rest.
func runKeys(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("keys", stderr,
		"usage: fcapctl keys [flags] VIEWER [CAP...]",
		"\nEvery counter VIEWER has, with its timestamps or counts, as each of its",
		"owners holds it (the primary first: backups may lag by the replication delay).",
		"Each counter is named scope:id when its node created it (since it started);",
		"CAPs, given as for check, name the others (shown as hashes otherwise).",
	)
	var nf nodeFlags
	nf.register(fs, 5*time.Second)
	if !parsePositional(fs, args, 1, -1) {
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
	ctx, cancel := context.WithTimeout(context.Background(), nf.timeout)
	defer cancel()
	admin, err := nf.conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl keys: %v\n", err)
		return 2
	}
	c, err := dialCluster(ctx, admin, splitAddrs(nf.addr), nf.timeout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl keys: %v\n", err)
		return 1
	}
	defer c.Close(context.Background())
	r := c.Ring()
	p, owners := r.Lookup(viewer)
	var outs []keysOwner
	for rank, o := range owners {
		m := r.Member(o)
		var st proto.ViewerState
		out := keysOwner{Node: m.Name, Addr: m.Addr, Rank: rank}
		if err := admin.Call(ctx, m.Addr, &proto.Inspect{Viewer: viewer}, &st); err != nil {
			out.Error = err.Error()
		} else {
			out.State = viewerStateOut(&st, labels)
		}
		outs = append(outs, out)
	}
	if nf.asJSON {
		b, _ := json.Marshal(keysOut{Viewer: viewer, Partition: p, Owners: outs})
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
		fmt.Fprintf(stdout, ": %d counters, %d reservations, %d impression ids remembered\n", len(o.State.Counters), o.State.Reservations, o.State.RememberedIDs)
		if o.State.LinkedTo != "" {
			fmt.Fprintf(stdout, "a device linked to %q: checks naming it as a device count against %q\n", o.State.LinkedTo, o.State.LinkedTo)
		}
		if len(o.State.Devices) > 0 {
			fmt.Fprintf(stdout, "devices linked to it: %s\n", strings.Join(o.State.Devices, ", "))
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "COUNTER\tALGORITHM\tLIMIT\tWINDOW\tSTATE")
		for _, k := range o.State.Counters {
			name := k.Label
			if name == "" {
				name = k.Hash
			}
			state := ""
			switch a, err := fcap.ParseAlgorithm(k.Algorithm); {
			case err == nil && engine.KeepsTimes(a):
				var ts []string
				for _, t := range k.Values {
					ts = append(ts, time.UnixMilli(t).UTC().Format("2006-01-02T15:04:05.000Z"))
				}
				state = fmt.Sprintf("%d impressions: %s", len(k.Values), strings.Join(ts, " "))
			default:
				state = fmt.Sprintf("window %d: counts %v", k.Bucket, k.Values)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\n", name, k.Algorithm, k.Limit, time.Duration(k.WindowMs)*time.Millisecond, state)
		}
		tw.Flush()
	}
	return 0
}

// keysOut is "fcapctl keys --json".
type keysOut struct {
	Viewer    string      `json:"viewer"`
	Partition int         `json:"partition"`
	Owners    []keysOwner `json:"owners"`
}

// keysOwner is what one owner of the viewer holds; State is nil when it
// did not answer.
type keysOwner struct {
	Node  string         `json:"node"`
	Addr  string         `json:"addr"`
	Rank  int            `json:"rank"`
	Error string         `json:"error,omitempty"`
	State *viewerStateJS `json:"state,omitempty"`
}

type viewerStateJS struct {
	Found         bool        `json:"found"`
	Primary       bool        `json:"primary"`
	Reservations  uint64      `json:"reservations"`
	RememberedIDs uint64      `json:"remembered_ids"`
	LinkedTo      string      `json:"linked_to,omitempty"`
	Devices       []string    `json:"devices,omitempty"`
	Counters      []counterJS `json:"counters"`
}

// counterJS is one counter: its key hash in hex (labelled scope:id when a
// CAP on the command line names it), and its timestamps or counts.
type counterJS struct {
	Hash      string  `json:"hash"`
	Label     string  `json:"label,omitempty"`
	Algorithm string  `json:"algorithm"`
	Limit     int64   `json:"limit"`
	WindowMs  int64   `json:"window_ms"`
	Bucket    int64   `json:"bucket"`
	Values    []int64 `json:"values"`
}

func viewerStateOut(st *proto.ViewerState, labels map[uint64]string) *viewerStateJS {
	out := &viewerStateJS{Found: st.Found, Primary: st.Primary, Reservations: st.Reservations,
		RememberedIDs: st.RememberedIDs, LinkedTo: strings.Clone(st.LinkedTo), Counters: []counterJS{}}
	for _, d := range st.Devices {
		out.Devices = append(out.Devices, strings.Clone(d))
	}
	for _, k := range st.Keys {
		label := labels[k.Hash]
		if label == "" {
			label = strings.Clone(k.Name) // the node's name for it, if it knows one
		}
		out.Counters = append(out.Counters, counterJS{Hash: fmt.Sprintf("%016x", k.Hash), Label: label,
			Algorithm: fcap.Algorithm(k.Algorithm).String(), Limit: k.Limit, WindowMs: k.Window, Bucket: k.Bucket,
			Values: append([]int64{}, k.Values...)})
	}
	return out
}
