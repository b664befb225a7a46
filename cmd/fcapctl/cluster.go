package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fcap-io/fcap/proto"
)

var stateNames = map[uint8]string{1: "joining", 2: "active", 3: "leaving"}

// runStatus prints every member's status as a table (or JSON).
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7700", "data-plane address of any node (comma-separated for several)")
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := fs.Duration("timeout", 5*time.Second, "deadline of the whole command")
	conn := addConnFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	admin, err := conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl status: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	topo, err := topology(ctx, admin, strings.Split(*addr, ","))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl status: %v\n", err)
		return 1
	}
	type row struct {
		Member proto.Member  `json:"member"`
		Status *proto.Status `json:"status,omitempty"`
		Error  string        `json:"error,omitempty"`
	}
	rows := make([]row, len(topo.Members))
	for i, m := range topo.Members {
		rows[i].Member = m
		var st proto.Status
		if err := admin.Call(ctx, m.Addr, &proto.StatusRequest{}, &st); err != nil {
			rows[i].Error = err.Error()
			continue
		}
		st.Name = strings.Clone(st.Name)
		rows[i].Status = &st
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Member.Name < rows[j].Member.Name })
	if *asJSON {
		b, _ := json.MarshalIndent(map[string]any{"epoch": fmt.Sprintf("%016x", topo.Epoch), "partitions": topo.Partitions, "replicas": topo.Replicas, "members": rows}, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "cluster epoch %016x, %d partitions, %d replicas\n\n", topo.Epoch, topo.Partitions, topo.Replicas)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tADDR\tSTATE\tEPOCH\tPRIMARY\tBACKUP\tSYNCING\tHANDING\tREPL-QUEUE\tUNDER-REPL\tVIEWERS\tKEYS\tMEMORY")
	for _, r := range rows {
		if r.Status == nil {
			fmt.Fprintf(w, "%s\t%s\t%s\tunreachable: %s\n", r.Member.Name, r.Member.Addr, stateNames[r.Member.State], r.Error)
			continue
		}
		s := r.Status
		fmt.Fprintf(w, "%s\t%s\t%s\t%016x\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Name, r.Member.Addr, stateNames[s.State], s.Epoch,
			s.Primaries, s.Backups, s.Syncing, s.Handing, s.ReplicationQueue, s.UnderReplicated, s.Viewers, s.Keys, bytesString(s.Bytes))
	}
	w.Flush()
	return 0
}

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
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7700", "data-plane address of any node")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long the hand-over may take")
	asJSON := fs.Bool("json", false, "print JSON")
	self := fs.Bool("self", false, "drain the node at --addr itself, whatever its name (for a preStop hook)")
	conn := addConnFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fcapctl drain [flags] NODE")
		fmt.Fprintln(stderr, "       fcapctl drain --self [--addr ADDR]")
		fmt.Fprintln(stderr, "\nHands NODE's partitions to their next owners (it keeps serving meanwhile),")
		fmt.Fprintln(stderr, "then makes it leave the cluster. It returns once every other member serves")
		fmt.Fprintln(stderr, "them; otherwise it exits 1 saying which member waits for what. The process")
		fmt.Fprintln(stderr, "stays up; stop it afterwards.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
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
