package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/fcap-io/fcap/proto"
)

var stateNames = map[uint8]string{1: "joining", 2: "active", 3: "leaving"}

// statusMember is one row of "fcapctl status": the member as gossip
// sees it and, when it answered, its own figures.
type statusMember struct {
	Name             string `json:"name"`
	Addr             string `json:"addr"`
	HTTPAddr         string `json:"http_addr"`
	State            string `json:"state"`
	Reachable        bool   `json:"reachable"`
	Error            string `json:"error,omitempty"`
	Epoch            string `json:"epoch,omitempty"`
	Primaries        uint64 `json:"primaries"`
	Backups          uint64 `json:"backups"`
	Syncing          uint64 `json:"syncing"`
	Handing          uint64 `json:"handing"`
	ReplicationQueue uint64 `json:"replication_queue"`
	ReplicationLagMs uint64 `json:"replication_lag_ms"`
	UnderReplicated  uint64 `json:"under_replicated"`
	Viewers          uint64 `json:"viewers"`
	Keys             uint64 `json:"keys"`
	Bytes            uint64 `json:"bytes"`
	Requests         uint64 `json:"requests"`
	JoinError        string `json:"join_error,omitempty"`

	refused bool // it answered with an error (a token without the operator role)
}

// statusOut is "fcapctl status --json".
type statusOut struct {
	Epoch      string         `json:"epoch"`
	Partitions int            `json:"partitions"`
	Replicas   int            `json:"replicas"`
	Healthy    bool           `json:"healthy"`
	Problems   []string       `json:"problems"`
	Members    []statusMember `json:"members"`
}

// runStatus prints every member's status as a table (or JSON). It exits
// exitDegraded when a member does not answer, has joined none of its
// seeds, or a partition is under-replicated, after printing everything it
// learned.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", stderr,
		"usage: fcapctl status [flags]",
		"\nEvery member: its state, partitions, replication and memory.",
		exitCodesHelp,
	)
	var nf nodeFlags
	nf.register(fs, 5*time.Second)
	if !parsePositional(fs, args, 0, 0) {
		return exitUsage
	}
	admin, err := nf.conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl status: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), nf.timeout)
	defer cancel()
	topo, err := topology(ctx, admin, splitAddrs(nf.addr))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl status: %v\n", err)
		return exitError
	}
	out := statusOut{Epoch: epochString(topo.Epoch), Partitions: topo.Partitions, Replicas: topo.Replicas, Problems: []string{}}
	out.Members = make([]statusMember, len(topo.Members))
	var wg sync.WaitGroup
	for i, m := range topo.Members {
		row := &out.Members[i]
		row.Name, row.Addr, row.HTTPAddr, row.State = m.Name, m.Addr, m.HTTPAddr, stateName(m.State)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st proto.Status
			if err := admin.Call(ctx, m.Addr, &proto.StatusRequest{}, &st); err != nil {
				row.Error = err.Error()
				var refused *proto.Error
				row.refused = errors.As(err, &refused)
				return
			}
			row.Reachable = true
			row.State, row.Epoch = stateName(st.State), epochString(st.Epoch)
			row.Primaries, row.Backups, row.Syncing, row.Handing = st.Primaries, st.Backups, st.Syncing, st.Handing
			row.ReplicationQueue, row.ReplicationLagMs, row.UnderReplicated = st.ReplicationQueue, st.LagMillis, st.UnderReplicated
			row.Viewers, row.Keys, row.Bytes, row.Requests = st.Viewers, st.Keys, st.Bytes, st.Requests
			row.JoinError = strings.Clone(st.JoinError)
		}()
	}
	wg.Wait()
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].Name < out.Members[j].Name })
	out.judge()
	if nf.asJSON {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		printStatus(stdout, &out)
	}
	if !out.Healthy {
		for _, p := range out.Problems {
			fmt.Fprintf(stderr, "fcapctl status: %s\n", p)
		}
		return exitDegraded
	}
	return exitOK
}

// judge lists what makes the cluster unhealthy: a member that did not
// answer or refused, a node joined to none of its seeds, a primary with
// under-replicated partitions.
func (out *statusOut) judge() {
	out.Problems = []string{}
	for _, m := range out.Members {
		switch {
		case m.refused:
			out.Problems = append(out.Problems, fmt.Sprintf("%s (%s) refused the status request: %s", m.Name, m.Addr, m.Error))
		case !m.Reachable:
			out.Problems = append(out.Problems, fmt.Sprintf("%s (%s) is unreachable: %s", m.Name, m.Addr, m.Error))
		case m.JoinError != "":
			out.Problems = append(out.Problems, fmt.Sprintf("%s has joined no cluster: %s", m.Name, m.JoinError))
		case m.UnderReplicated > 0:
			out.Problems = append(out.Problems, fmt.Sprintf("%s is primary of %d under-replicated partitions", m.Name, m.UnderReplicated))
		}
	}
	out.Healthy = len(out.Problems) == 0
}

// printStatus prints the status table; a member that did not answer
// keeps its columns, each "-", and is explained under the table.
func printStatus(stdout io.Writer, out *statusOut) {
	fmt.Fprintf(stdout, "cluster epoch %s, %d partitions, %d replicas\n\n", out.Epoch, out.Partitions, out.Replicas)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tADDR\tSTATE\tEPOCH\tPRIMARY\tBACKUP\tSYNCING\tHANDING\tREPL-QUEUE\tUNDER-REPL\tVIEWERS\tKEYS\tMEMORY")
	for _, m := range out.Members {
		if !m.Reachable {
			state := "unreachable"
			if m.refused {
				state = "refused"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, m.Addr, state, strings.Repeat("-\t", 9)+"-")
			continue
		}
		epoch := m.Epoch
		if epoch == "" {
			epoch = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", m.Name, m.Addr, m.State, epoch,
			m.Primaries, m.Backups, m.Syncing, m.Handing, m.ReplicationQueue, m.UnderReplicated, m.Viewers, m.Keys, bytesString(m.Bytes))
	}
	w.Flush()
	if len(out.Problems) > 0 {
		fmt.Fprintln(stdout)
		for _, p := range out.Problems {
			fmt.Fprintln(stdout, "! "+p)
		}
	}
}

// epochString writes an epoch as the 16 hex digits every fcapctl output
// uses: epochs reach past 2^53, where JSON numbers lose digits.
func epochString(e uint64) string { return fmt.Sprintf("%016x", e) }

func bytesString(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%dB", b)
}

// runDrain asks a node to hand its partitions over and leave.
func runDrain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("drain", stderr,
		"usage: fcapctl drain [flags] NODE",
		"       fcapctl drain --self [--addr ADDR]",
		"\nHands NODE's partitions to their next owners (it keeps serving meanwhile),",
		"then makes it leave the cluster. It returns once every other member serves",
		"them; otherwise it exits 1 saying which member waits for what. The process",
		"stays up; stop it afterwards.",
	)
	addr := fs.String("addr", "127.0.0.1:7700", "data-plane address of any node")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long the hand-over may take")
	asJSON := fs.Bool("json", false, "print JSON")
	self := fs.Bool("self", false, "drain the node at --addr itself, whatever its name (for a preStop hook)")
	conn := addConnFlags(fs)
	if err := parseArgs(fs, args); err != nil {
		return 2
	}
	if *self && fs.NArg() != 0 || !*self && fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	admin, err := conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl drain: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+10*time.Second)
	defer cancel()
	var target *proto.Member
	name := fs.Arg(0)
	if *self {
		var st proto.Status
		err := admin.Call(ctx, *addr, &proto.StatusRequest{}, &st)
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl drain: %v\n", err)
			return 1
		}
		name = st.Name
		target = &proto.Member{Name: st.Name, Addr: *addr}
	} else {
		topo, err := topology(ctx, admin, strings.Split(*addr, ","))
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl drain: %v\n", err)
			return 1
		}
		for i := range topo.Members {
			if topo.Members[i].Name == name {
				target = &topo.Members[i]
			}
		}
		if target == nil {
			fmt.Fprintf(stderr, "fcapctl drain: no member named %q in the cluster\n", name)
			return 1
		}
	}
	start := time.Now()
	var res proto.DrainResult
	if err := admin.Call(ctx, target.Addr, &proto.Drain{TimeoutMillis: timeout.Milliseconds()}, &res); err != nil {
		fmt.Fprintf(stderr, "fcapctl drain %s: %v\n", name, err)
		return 1
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"node": name, "partitions_sent": res.Partitions, "seconds": time.Since(start).Seconds()})
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "%s drained: %d partition transfers sent in %v; it has left the cluster\n", name, res.Partitions, time.Since(start).Round(time.Millisecond))
	return 0
}
