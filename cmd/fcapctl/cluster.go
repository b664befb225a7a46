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
	// Authority: it holds a majority of the member set and may grant
	// strict writes; QuorumMembers and QuorumConfirmed say how it counts.
	Authority       bool   `json:"strict_authority"`
	QuorumMembers   uint64 `json:"quorum_members"`
	QuorumConfirmed uint64 `json:"quorum_confirmed"`
	Claimed         uint64 `json:"claimed_partitions"`
	// Drifting counts viewers whose copies still differed from a backup's
	// after settling, repaired by anti-entropy's last round.
	Drifting uint64 `json:"drifting_viewers"`
	// Version is its build, UptimeMillis how long it has run,
	// MemoryLimit its --memory-limit in bytes (0: none); the Recent
	// figures count its ad servers' requests over RecentMillis (about
	// the last minute), those answered with an error, and bound their
	// p99 handling time on the node (past the largest bucket with
	// P99Over). All absent from a node that does not report them.
	Version        string `json:"version,omitempty"`
	UptimeMillis   uint64 `json:"uptime_ms,omitempty"`
	MemoryLimit    uint64 `json:"memory_limit,omitempty"`
	RecentMillis   uint64 `json:"recent_ms,omitempty"`
	RecentRequests uint64 `json:"recent_requests,omitempty"`
	RecentErrors   uint64 `json:"recent_errors,omitempty"`
	P99Nanos       uint64 `json:"p99_ns,omitempty"`
	P99Over        bool   `json:"p99_over,omitempty"`

	// Regions are its links to peer regions (none on a single region).
	Regions []statusRegion `json:"regions,omitempty"`

	refused bool                 // it answered with an error (a token without the operator role)
	failed  []proto.FailedMember // the members it counts failed
}

// statusRegion is a member's link to one peer region.
type statusRegion struct {
	Name      string `json:"name"`
	Reachable bool   `json:"reachable"`
	LagMillis uint64 `json:"lag_ms"`
	Queue     uint64 `json:"queue"`
	// Lent and Borrowed are the units of strict caps' shares the member
	// lent the region and borrowed from it since it started.
	Lent     uint64 `json:"shares_lent"`
	Borrowed uint64 `json:"shares_borrowed"`
	// RetiredSince is when an operator retired the region on the member
	// (fcapctl region retire), RFC 3339; empty: not retired.
	RetiredSince string `json:"retired_since,omitempty"`
}

// failedMember is a member the cluster counts as failed: vanished
// without leaving, not yet forgotten.
type failedMember struct {
	Name string `json:"name"`
	// Addr is the data-plane address it last advertised.
	Addr string `json:"addr"`
	// Since is when the first member that reports it counted it failed.
	Since time.Time `json:"since"`
	// ReportedBy names the members that count it failed.
	ReportedBy []string `json:"reported_by"`
}

// statusOut is "fcapctl status --json".
type statusOut struct {
	Epoch      string   `json:"epoch"`
	Partitions int      `json:"partitions"`
	Replicas   int      `json:"replicas"`
	Healthy    bool     `json:"healthy"`
	Problems   []string `json:"problems"`
	// Warnings do not make the cluster unhealthy, but deserve a look
	// (a replica count that leaves some partitions without a copy on a
	// majority).
	Warnings []string       `json:"warnings"`
	Members  []statusMember `json:"members"`
	// Failed lists the members some node counts as failed, until they
	// return or fcapctl forget removes them.
	Failed []failedMember `json:"failed"`
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
			row.Authority, row.QuorumMembers, row.QuorumConfirmed, row.Claimed, row.Drifting = st.Authority, st.QuorumMembers, st.QuorumConfirmed, st.Claimed, st.Drifting
			row.Version, row.UptimeMillis, row.MemoryLimit = strings.Clone(st.Version), st.UptimeMillis, st.MemoryLimit
			row.RecentMillis, row.RecentRequests, row.RecentErrors, row.P99Nanos, row.P99Over = st.RecentMillis, st.RecentRequests, st.RecentErrors, st.P99Nanos, st.P99Over
			for _, r := range st.Regions {
				sr := statusRegion{Name: strings.Clone(r.Name), Reachable: r.Reachable, LagMillis: r.LagMillis, Queue: r.Queue, Lent: r.Lent, Borrowed: r.Borrowed}
				if r.Retired {
					sr.RetiredSince = time.UnixMilli(r.RetiredAtMillis).UTC().Format(time.RFC3339)
				}
				row.Regions = append(row.Regions, sr)
			}
			for _, f := range st.Failed {
				row.failed = append(row.failed, proto.FailedMember{Name: strings.Clone(f.Name), Addr: strings.Clone(f.Addr), SinceMillis: f.SinceMillis})
			}
		}()
	}
	wg.Wait()
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].Name < out.Members[j].Name })
	out.collectFailed()
	out.judge()
	if nf.asJSON {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		printStatus(stdout, &out)
	}
	for _, w := range out.Warnings {
		fmt.Fprintf(stderr, "fcapctl status: warning: %s\n", w)
	}
	if !out.Healthy {
		for _, p := range out.Problems {
			fmt.Fprintf(stderr, "fcapctl status: %s\n", p)
		}
		return exitDegraded
	}
	return exitOK
}

// collectFailed gathers the failed members every reachable member
// reports, oldest failure first.
func (out *statusOut) collectFailed() {
	byName := map[string]*failedMember{}
	for _, m := range out.Members {
		for _, f := range m.failed {
			fm := byName[f.Name]
			since := time.UnixMilli(f.SinceMillis).UTC()
			if fm == nil {
				fm = &failedMember{Name: f.Name, Addr: f.Addr, Since: since}
				byName[f.Name] = fm
			}
			if since.Before(fm.Since) {
				fm.Since = since
			}
			fm.ReportedBy = append(fm.ReportedBy, m.Name)
		}
	}
	out.Failed = []failedMember{}
	for _, fm := range byName {
		out.Failed = append(out.Failed, *fm)
	}
	sort.Slice(out.Failed, func(i, j int) bool {
		if !out.Failed[i].Since.Equal(out.Failed[j].Since) {
			return out.Failed[i].Since.Before(out.Failed[j].Since)
		}
		return out.Failed[i].Name < out.Failed[j].Name
	})
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
		if m.Reachable && !m.Authority && m.QuorumMembers > 0 {
			out.Problems = append(out.Problems, fmt.Sprintf("%s does not hold a majority of the member set (%d of %d confirm its ring, %d needed): strict caps fail closed on it",
				m.Name, m.QuorumConfirmed, m.QuorumMembers, m.QuorumMembers/2+1))
		}
		if m.Reachable && m.Drifting > 0 {
			out.Problems = append(out.Problems, fmt.Sprintf("%s's copies of %d viewers differed from a backup's after settling: anti-entropy is repairing them", m.Name, m.Drifting))
		}
		if m.Reachable && m.Claimed > 0 {
			out.Problems = append(out.Problems, fmt.Sprintf("%s serves %d partitions claimed without any holder's copy: strict caps fail closed on them until a holder returns or is forgotten", m.Name, m.Claimed))
		}
	}
	// Fewer ring members than replicas: every partition has fewer copies
	// than asked for, whatever each primary says of its backups (it has
	// none to send to). One node started with --replicas 2 used to look
	// healthy. (A member still joining counts: it receives its copies.)
	switch n := len(out.Members); {
	case n == 0 || n >= out.Replicas:
	case n == 1:
		out.Problems = append(out.Problems, fmt.Sprintf("no backup: %d replicas, but one member holds every partition alone; a crash of it loses what it counted (add members, or run --replicas 1 if one copy is meant)", out.Replicas))
	default:
		out.Problems = append(out.Problems, fmt.Sprintf("%d members for %d replicas: every partition has %d copies; add members", n, out.Replicas, n))
	}
	for _, f := range out.Failed {
		out.Problems = append(out.Problems, fmt.Sprintf("%s (%s) failed at %s (reported by %s): it counts toward the majority until it returns; `fcapctl forget %s` if it will not",
			f.Name, f.Addr, f.Since.Format(time.RFC3339), strings.Join(f.ReportedBy, ", "), f.Name))
	}
	out.Warnings = []string{}
	if n := len(out.Members) + len(out.Failed); out.Replicas > 0 && out.Replicas < (n+1)/2 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d replicas for %d members: a minority can hold every copy of a partition, which the majority side then cannot serve strict caps for during a partition (use at least %d)",
			out.Replicas, n, (n+1)/2))
	}
	for _, m := range out.Members {
		for _, r := range m.Regions {
			if !r.Reachable && r.RetiredSince == "" {
				out.Warnings = append(out.Warnings, fmt.Sprintf("%s cannot reach peer region %s: %d changed viewers wait, the oldest for %s (soft caps overshoot across regions meanwhile)",
					m.Name, r.Name, r.Queue, (time.Duration(r.LagMillis)*time.Millisecond).String()))
			}
		}
	}
	out.Healthy = len(out.Problems) == 0
}

// printStatus prints the status table; a member that did not answer
// keeps its columns, each "-", and is explained under the table.
func printStatus(stdout io.Writer, out *statusOut) {
	fmt.Fprintf(stdout, "cluster epoch %s, %d partitions, %d replicas\n\n", out.Epoch, out.Partitions, out.Replicas)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tADDR\tSTATE\tEPOCH\tSTRICT\tPRIMARY\tBACKUP\tSYNCING\tHANDING\tREPL-QUEUE\tUNDER-REPL\tVIEWERS\tKEYS\tMEMORY\tVERSION\tUPTIME")
	for _, m := range out.Members {
		if !m.Reachable {
			state := "unreachable"
			if m.refused {
				state = "refused"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, m.Addr, state, strings.Repeat("-\t", 12)+"-")
			continue
		}
		epoch := m.Epoch
		if epoch == "" {
			epoch = "-"
		}
		auth := fmt.Sprintf("yes(%d/%d)", m.QuorumConfirmed, m.QuorumMembers)
		if !m.Authority {
			auth = fmt.Sprintf("NO(%d/%d)", m.QuorumConfirmed, m.QuorumMembers)
		}
		version, uptime := m.Version, "-"
		if version == "" { // a node that predates them
			version = "-"
		} else {
			uptime = (time.Duration(m.UptimeMillis) * time.Millisecond).Round(time.Second).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", m.Name, m.Addr, m.State, epoch, auth,
			m.Primaries, m.Backups, m.Syncing, m.Handing, m.ReplicationQueue, m.UnderReplicated, m.Viewers, m.Keys, bytesString(m.Bytes), version, uptime)
	}
	for _, f := range out.Failed {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f.Name, f.Addr, "FAILED@"+f.Since.Format(time.RFC3339), strings.Repeat("-\t", 12)+"-")
	}
	w.Flush()
	printRegions(stdout, out)
	if len(out.Warnings) > 0 {
		fmt.Fprintln(stdout)
		for _, p := range out.Warnings {
			fmt.Fprintln(stdout, "warning: "+p)
		}
	}
	if len(out.Problems) > 0 {
		fmt.Fprintln(stdout)
		for _, p := range out.Problems {
			fmt.Fprintln(stdout, "! "+p)
		}
	}
}

// printRegions prints each member's links to its peer regions, when any
// member has some.
func printRegions(stdout io.Writer, out *statusOut) {
	any := false
	for _, m := range out.Members {
		any = any || len(m.Regions) > 0
	}
	if !any {
		return
	}
	fmt.Fprintln(stdout, "\nREGIONS")
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tPEER-REGION\tREACHABLE\tLAG\tQUEUE\tLENT\tBORROWED")
	for _, m := range out.Members {
		for _, r := range m.Regions {
			reach := "yes"
			switch {
			case r.RetiredSince != "":
				reach = "RETIRED since " + r.RetiredSince
			case !r.Reachable:
				reach = "NO"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", m.Name, r.Name, reach, (time.Duration(r.LagMillis) * time.Millisecond).String(), r.Queue, r.Lent, r.Borrowed)
		}
	}
	w.Flush()
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

// runForget removes failed members from the member set on every member.
func runForget(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("forget", stderr,
		"usage: fcapctl forget [flags] NODE...",
		"\nRemoves each NODE, a member that failed (vanished without a drain), from the",
		"member set a strict majority is counted against, on every member; partitions",
		"claimed for want of their holders are then served whole from what the",
		"survivors have. Use it for a member that will not come back: if it does, it",
		"joins as a new member. A member that is still alive is refused (drain it).",
		exitCodesHelp,
	)
	var nf nodeFlags
	nf.register(fs, 10*time.Second)
	if !parsePositional(fs, args, 1, -1) {
		return exitUsage
	}
	admin, err := nf.conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl forget: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), nf.timeout)
	defer cancel()
	topo, err := topology(ctx, admin, splitAddrs(nf.addr))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl forget: %v\n", err)
		return exitError
	}
	status := exitOK
	for _, name := range fs.Args() {
		if m := memberNamed(topo, name); m != nil {
			fmt.Fprintf(stderr, "fcapctl forget: %s (%s) is a live member of the ring: drain it instead\n", name, m.Addr)
			status = exitError
			continue
		}
		forgot, errs := 0, []string{}
		for _, m := range topo.Members {
			var res proto.ForgetResult
			err := admin.Call(ctx, m.Addr, &proto.Forget{Node: name}, &res)
			switch {
			case err == nil:
				forgot++
			case errors.Is(err, proto.ErrBadRequest) && strings.Contains(err.Error(), "not a failed member"):
				// It does not count NODE failed (any more): nothing to do there.
			default:
				errs = append(errs, fmt.Sprintf("%s: %v", m.Name, err))
			}
		}
		switch {
		case len(errs) > 0:
			fmt.Fprintf(stderr, "fcapctl forget %s: %s\n", name, strings.Join(errs, "; "))
			status = exitError
		case forgot == 0:
			fmt.Fprintf(stderr, "fcapctl forget: no member counts %q as failed\n", name)
			status = exitError
		default:
			fmt.Fprintf(stdout, "%s forgotten by %d members\n", name, forgot)
		}
	}
	return status
}

// memberNamed returns the ring member named name, or nil.
func memberNamed(topo *proto.Topology, name string) *proto.Member {
	for i := range topo.Members {
		if topo.Members[i].Name == name {
			return &topo.Members[i]
		}
	}
	return nil
}

// adminCaller sends one admin request (rpc.Admin).
type adminCaller interface {
	Call(ctx context.Context, addr string, req, resp proto.Message) error
}

// notAMember says why name, which a drain was asked for, is no ring
// member, from the first member that answers a status request: it
// already left (a drain done before: exitOK, nothing to do) or was
// forgotten (exitOK: it is gone too), it failed (exitError: a member that
// vanished cannot hand anything over), or no member knows it
// (exitError).
func notAMember(ctx context.Context, admin adminCaller, topo *proto.Topology, name string) (string, int) {
	var names []string
	for _, m := range topo.Members {
		names = append(names, m.Name)
	}
	unknown := fmt.Sprintf("no member named %q in the cluster (members: %s)", name, strings.Join(names, ", "))
	for _, m := range topo.Members {
		var st proto.Status
		if err := admin.Call(ctx, m.Addr, &proto.StatusRequest{}, &st); err != nil {
			continue
		}
		for _, d := range st.Departed {
			if d.Name != name {
				continue
			}
			at := time.UnixMilli(d.AtMillis).UTC().Format(time.RFC3339)
			if d.Forgotten {
				return fmt.Sprintf("%s is already gone: it failed and was forgotten at %s (fcapctl forget); nothing to drain", name, at), exitOK
			}
			return fmt.Sprintf("%s has already left the cluster (at %s, by %s's account): nothing to drain; start it again to rejoin", name, at, st.Name), exitOK
		}
		for _, f := range st.Failed {
			if f.Name == name {
				return fmt.Sprintf("%s (%s) failed at %s (it vanished without a drain): it cannot hand anything over; start it again, or `fcapctl forget %s` if it will not return",
					name, f.Addr, time.UnixMilli(f.SinceMillis).UTC().Format(time.RFC3339), name), exitError
			}
		}
		return unknown, exitError
	}
	return unknown, exitError
}

// runDrain asks a node to hand its partitions over and leave.
func runDrain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("drain", stderr,
		"usage: fcapctl drain [flags] NODE",
		"       fcapctl drain --self [--addr ADDR]",
		"\nHands NODE's partitions to their next owners (it keeps serving meanwhile),",
		"then makes it leave the cluster. It returns once every other member serves",
		"them; otherwise it exits 1 saying which member waits for what. fcapd then",
		"exits by itself (status 0; 1 if the hand-over did not complete); start it",
		"again, with the same --name and --data-dir, to rejoin. NODE already gone",
		"(drained before, or forgotten) is said so and exits 0; a failed NODE, or a",
		"name no member knows, exits 1.",
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
			msg, code := notAMember(ctx, admin, topo, name)
			switch {
			case code != exitOK:
				fmt.Fprintf(stderr, "fcapctl drain: %s\n", msg)
			case *asJSON:
				b, _ := json.Marshal(map[string]any{"node": name, "partitions_sent": 0, "seconds": 0, "already_gone": true})
				fmt.Fprintln(stdout, string(b))
			default:
				fmt.Fprintln(stdout, msg)
			}
			return code
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
