package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// The data commands: ring, check, allow, record, reserve. They go through
// the same client an ad server embeds, so they see what it sees.

const capSyntax = `A CAP is scope:id:limit:window[:algorithm][:mode], e.g. campaign:c42:3:24h,
creative:x9:1:1h:sliding:strict or campaign:c1:3:24h:strict. The window is
milliseconds or a duration with a unit: ms, s, m, h, d (24h) or w (7d), e.g.
90m, 7d, 2w, 1d12h. After the window come, in any order, an algorithm
(sliding, buckets, fixed; default sliding) and a mode (soft, strict; default
soft), each bare or named: algorithm=buckets, mode=strict.
Join caps with "+" to make one candidate subject to all of them.`

// parseCap reads scope:id:limit:window[:algorithm][:mode].
func parseCap(s string) (fcap.Cap, error) {
	f := strings.Split(s, ":")
	if len(f) < 4 || len(f) > 6 {
		return fcap.Cap{}, fmt.Errorf("cap %q: want scope:id:limit:window[:algorithm][:mode]", s)
	}
	limit, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return fcap.Cap{}, fmt.Errorf("cap %q: limit %q is not an integer", s, f[2])
	}
	window, err := parseWindow(f[3])
	if err != nil {
		return fcap.Cap{}, fmt.Errorf("cap %q: %w", s, err)
	}
	c := fcap.Cap{Scope: f[0], ID: f[1], Limit: limit, Window: window}
	var haveAlg, haveMode bool
	for _, opt := range f[4:] {
		key, val, named := strings.Cut(opt, "=")
		if !named {
			key, val = "", opt
		}
		alg, aerr := fcap.ParseAlgorithm(val)
		mode, merr := fcap.ParseMode(val)
		switch {
		case val == "":
			return fcap.Cap{}, fmt.Errorf("cap %q: empty field after the window", s)
		case (key == "" || key == "algorithm" || key == "alg") && aerr == nil:
			if haveAlg {
				return fcap.Cap{}, fmt.Errorf("cap %q: two algorithms", s)
			}
			c.Algorithm, haveAlg = alg, true
		case (key == "" || key == "mode") && merr == nil:
			if haveMode {
				return fcap.Cap{}, fmt.Errorf("cap %q: two modes", s)
			}
			c.Mode, haveMode = mode, true
		case key == "algorithm" || key == "alg":
			return fcap.Cap{}, fmt.Errorf("cap %q: %w (want sliding, buckets or fixed)", s, aerr)
		case key == "mode":
			return fcap.Cap{}, fmt.Errorf("cap %q: %w (want soft or strict)", s, merr)
		case named:
			return fcap.Cap{}, fmt.Errorf("cap %q: unknown field %q (want algorithm= or mode=)", s, key)
		default:
			return fcap.Cap{}, fmt.Errorf("cap %q: %q is neither an algorithm (sliding, buckets, fixed) nor a mode (soft, strict)", s, val)
		}
	}
	return c, nil
}

// parseWindow reads a window: milliseconds, or a Go duration extended
// with d (24h) and w (7 days), e.g. 24h, 7d, 2w, 1d12h.
func parseWindow(s string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return fcap.Millis(ms), nil
	}
	bad := fmt.Errorf("window %q is neither milliseconds nor a duration (ms, s, m, h, d, w)", s)
	var total time.Duration
	rest := s
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		j := i
		for j < len(rest) && !(rest[j] >= '0' && rest[j] <= '9' || rest[j] == '.') {
			j++
		}
		num, unit := rest[:i], rest[i:j]
		rest = rest[j:]
		if num == "" || unit == "" {
			return 0, bad
		}
		var mult time.Duration
		switch unit {
		case "d":
			mult = 24 * time.Hour
		case "w":
			mult = 7 * 24 * time.Hour
		default:
			d, err := time.ParseDuration(num + unit)
			if err != nil {
				return 0, bad
			}
			total += d
			continue
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || v*float64(mult) > float64(1<<62) {
			return 0, bad
		}
		total += time.Duration(v * float64(mult))
	}
	if total <= 0 {
		return 0, fmt.Errorf("window %q is not positive", s)
	}
	if total%time.Millisecond != 0 {
		return 0, fmt.Errorf("window %q is not a whole number of milliseconds", s)
	}
	return total, nil
}

// parseCandidate reads caps joined with "+".
func parseCandidate(s string) (fcap.Candidate, error) {
	var cand fcap.Candidate
	for _, part := range strings.Split(s, "+") {
		c, err := parseCap(part)
		if err != nil {
			return cand, err
		}
		cand.Caps = append(cand.Caps, c)
	}
	return cand, nil
}

// dataFlags are the flags every data command shares.
type dataFlags struct {
	addr    string
	timeout time.Duration
	now     int64
	asJSON  bool
	device  bool
	conn    *connFlags
}

func (d *dataFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.addr, "addr", "127.0.0.1:7700", "data-plane address of any node (comma-separated for several)")
	fs.DurationVar(&d.timeout, "timeout", 2*time.Second, "deadline of each call")
	fs.Int64Var(&d.now, "now", 0, "judge at this time, Unix ms (default: the owner's clock)")
	fs.BoolVar(&d.asJSON, "json", false, "print JSON")
	fs.BoolVar(&d.device, "device", false, "VIEWER names a device: count it as the viewer it is linked to")
	d.conn = addConnFlags(fs)
}

func (d *dataFlags) opts() []client.CallOption {
	var opts []client.CallOption
	if d.now != 0 {
		opts = append(opts, client.At(d.now))
	}
	if d.device {
		opts = append(opts, client.Device())
	}
	return opts
}

// connect starts a client once a seed has answered, and reports on
// stderr the members it cannot reach (their viewers are answered by
// backups, or fail closed for strict caps).
func (d *dataFlags) connect(stderr io.Writer) (*client.Client, error) {
	admin, err := d.conn.admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout+3*time.Second)
	defer cancel()
	return dialCluster(ctx, admin, splitAddrs(d.addr), d.timeout, stderr)
}

// start parses the command's flags, checks that the positional
// arguments hold the fixed ones (n of them) and at least one CAP after
// them, reads the CAPs as one candidate and connects. When c is nil the
// command exits with code, having said why.
func (d *dataFlags) start(name string, fs *flag.FlagSet, args []string, n int, stderr io.Writer) (c *client.Client, cand fcap.Candidate, code int) {
	if !parsePositional(fs, args, n+1, -1) {
		return nil, cand, 2
	}
	// VIEWER (and record's and void's IMPRESSION-ID) come before the
	// CAPs: one shaped like a CAP is a CAP put where it does not go
	// ("record u7 CAP CAP" once recorded the impression "CAP" on the
	// second cap only).
	for i, what := range []string{"VIEWER", "IMPRESSION-ID"}[:n] {
		if _, err := parseCap(fs.Arg(i)); err == nil {
			fmt.Fprintf(stderr, "fcapctl %s: %s %q is a CAP; usage: %s\n", name, what, fs.Arg(i), usageLine(name, n))
			return nil, cand, 2
		}
	}
	cand, err := parseCandidate(strings.Join(fs.Args()[n:], "+"))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl %s: %v\n", name, err)
		return nil, cand, 2
	}
	if c, err = d.connect(stderr); err != nil {
		fmt.Fprintf(stderr, "fcapctl %s: %v\n", name, err)
		return nil, cand, 1
	}
	return c, cand, 0
}

// usageLine is a data command's positional arguments, for a refusal.
func usageLine(name string, n int) string {
	if n == 2 {
		return "fcapctl " + name + " [flags] VIEWER IMPRESSION-ID CAP..."
	}
	return "fcapctl " + name + " [flags] VIEWER CAP..."
}

func newDataFlagSet(name, usage string, stderr io.Writer, d *dataFlags) *flag.FlagSet {
	fs := newFlagSet(name, stderr,
		usage,
		"",
		capSyntax,
		"",
		exitCodesHelp,
		"",
	)
	d.register(fs)
	return fs
}

type verdictOut struct {
	Candidate  string `json:"candidate"`
	Allowed    bool   `json:"allowed"`
	Remaining  int64  `json:"remaining"`
	Blocking   int    `json:"blocking"`
	FailOpen   bool   `json:"fail_open,omitempty"`
	FailClosed bool   `json:"fail_closed,omitempty"`
	Stale      bool   `json:"stale,omitempty"`
}

func toOut(label string, v client.Verdict) verdictOut {
	return verdictOut{label, v.Allowed, v.Remaining, v.Blocking, v.FailOpen, v.FailClosed, v.Stale}
}

func printVerdicts(stdout io.Writer, asJSON bool, vs []verdictOut) {
	if asJSON {
		b, _ := json.Marshal(vs)
		fmt.Fprintln(stdout, string(b))
		return
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CANDIDATE\tALLOWED\tREMAINING\tBLOCKING\tNOTE")
	for _, v := range vs {
		note := ""
		switch {
		case v.FailOpen:
			note = "fail-open: the cluster did not answer in time"
		case v.FailClosed:
			note = "fail-closed: the cluster did not answer in time"
		case v.Stale:
			note = "stale: a backup answered"
		}
		blocking := "-"
		if v.Blocking >= 0 {
			blocking = strconv.Itoa(v.Blocking)
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s\n", v.Candidate, v.Allowed, v.Remaining, blocking, note)
	}
	tw.Flush()
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	var d dataFlags
	fs := newDataFlagSet("check", "usage: fcapctl check [flags] VIEWER CANDIDATE...\n\nRead-only verdicts for each candidate (one CAP or CAP+CAP...).", stderr, &d)
	if !parsePositional(fs, args, 2, -1) {
		return 2
	}
	viewer := fs.Arg(0)
	var cands []fcap.Candidate
	for _, s := range fs.Args()[1:] {
		cand, err := parseCandidate(s)
		if err != nil {
			fmt.Fprintf(stderr, "fcapctl check: %v\n", err)
			return 2
		}
		cands = append(cands, cand)
	}
	c, err := d.connect(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl check: %v\n", err)
		return 1
	}
	defer c.Close(context.Background())
	res, err := c.Check(context.Background(), viewer, cands, d.opts()...)
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl check: %v\n", err)
		return 1
	}
	var out []verdictOut
	fallback := false
	for i, v := range res.Verdicts {
		out = append(out, toOut(fs.Arg(i+1), v))
		fallback = fallback || v.FailOpen || v.FailClosed
	}
	printVerdicts(stdout, d.asJSON, out)
	if fallback {
		fmt.Fprintf(stderr, "fcapctl check: no owner of %q answered in time (%s); fail-open and fail-closed verdicts are the fallback policy, not the cluster's\n", viewer, ownersOf(c, viewer))
		return exitError
	}
	return exitOK
}

func runAllow(args []string, stdout, stderr io.Writer) int {
	var d dataFlags
	fs := newDataFlagSet("allow", "usage: fcapctl allow [flags] VIEWER CAP...\n\nChecks every CAP and, if all have room, records one impression on each (atomically).", stderr, &d)
	c, cand, code := d.start("allow", fs, args, 1, stderr)
	if c == nil {
		return code
	}
	defer c.Close(context.Background())
	v, err := c.Allow(context.Background(), fs.Arg(0), cand.Caps, d.opts()...)
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl allow: %v\n", err)
		return exitError
	}
	printVerdicts(stdout, d.asJSON, []verdictOut{toOut(strings.Join(fs.Args()[1:], "+"), v)})
	return verdictStatus("allow", c, fs.Arg(0), v, stderr)
}

// verdictStatus is the exit status of a one-verdict command: granted,
// denied, or a fallback verdict the cluster did not give (said on stderr,
// naming the viewer's owners).
func verdictStatus(name string, c *client.Client, viewer string, v client.Verdict, stderr io.Writer) int {
	switch {
	case v.FailOpen || v.FailClosed:
		fmt.Fprintf(stderr, "fcapctl %s: no owner of %q answered in time (%s); the verdict is the fallback policy, not the cluster's\n", name, viewer, ownersOf(c, viewer))
		return exitError
	case !v.Allowed:
		return exitDenied
	}
	return exitOK
}

// ownersOf names a viewer's owners, primary first, for error messages.
func ownersOf(c *client.Client, viewer string) string {
	r := c.Ring()
	if r == nil {
		return "no topology"
	}
	_, owners := r.Lookup(viewer)
	var names []string
	for _, o := range owners {
		m := r.Member(o)
		names = append(names, m.Name+" at "+m.Addr)
	}
	if len(names) == 0 {
		return "no owner"
	}
	return "owners " + strings.Join(names, ", ")
}

func runRecord(args []string, stdout, stderr io.Writer) int {
	var d dataFlags
	fs := newDataFlagSet("record", "usage: fcapctl record [flags] VIEWER IMPRESSION-ID CAP...\n\nRecords a played impression (idempotent on its id) and waits until the owner acknowledged it.", stderr, &d)
	at := fs.Int64("time", 0, "when the impression played, Unix ms (default: now)")
	c, cand, code := d.start("record", fs, args, 2, stderr)
	if c == nil {
		return code
	}
	defer c.Close(context.Background())
	t := *at
	if t == 0 {
		t = time.Now().UnixMilli()
	}
	if err := c.Record(fs.Arg(0), fcap.Impression{ID: fs.Arg(1), Time: t, Caps: cand.Caps}); err != nil {
		fmt.Fprintf(stderr, "fcapctl record: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout+30*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		fmt.Fprintf(stderr, "fcapctl record: %v\n", err)
		return 1
	}
	if st := c.Stats(); st.RecordsAcked != 1 {
		fmt.Fprintf(stderr, "fcapctl record: the impression was dropped (invalid, or no owner answered; %d retries)\n", st.RecordRetries)
		return 1
	}
	if d.asJSON {
		fmt.Fprintf(stdout, `{"recorded":true,"time":%d}`+"\n", t)
	} else {
		fmt.Fprintf(stdout, "recorded %s for %s at %d\n", fs.Arg(1), fs.Arg(0), t)
	}
	return 0
}

func runReserve(args []string, stdout, stderr io.Writer) int {
	var d dataFlags
	fs := newDataFlagSet("reserve", "usage: fcapctl reserve [flags] VIEWER CAP...\n\nHolds one impression's worth of every CAP for --ttl.", stderr, &d)
	ttl := fs.Duration("ttl", 30*time.Second, "how long the reservation holds")
	c, cand, code := d.start("reserve", fs, args, 1, stderr)
	if c == nil {
		return code
	}
	defer c.Close(context.Background())
	v, r, err := c.Reserve(context.Background(), fs.Arg(0), cand, *ttl, d.opts()...)
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl reserve: %v\n", err)
		return exitError
	}
	if d.asJSON {
		b, _ := json.Marshal(map[string]any{"verdict": toOut(strings.Join(fs.Args()[1:], "+"), v), "reservation": strconv.FormatUint(r.ID, 10)})
		fmt.Fprintln(stdout, string(b))
	} else {
		printVerdicts(stdout, false, []verdictOut{toOut(strings.Join(fs.Args()[1:], "+"), v)})
		if r.ID != 0 {
			fmt.Fprintf(stdout, "reservation %d, held for %v\n", r.ID, *ttl)
		}
	}
	return verdictStatus("reserve", c, fs.Arg(0), v, stderr)
}

// runRing prints how partitions are spread: per member, primaries and
// backups; with --partitions, every partition's owners.
func runRing(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("ring", stderr)
	var nf nodeFlags
	nf.register(fs, 5*time.Second)
	all := fs.Bool("partitions", false, "also list every partition's owners")
	if err := parseArgs(fs, args); err != nil {
		return 2
	}
	admin, err := nf.conn.admin()
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl ring: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), nf.timeout)
	defer cancel()
	topo, err := topology(ctx, admin, strings.Split(nf.addr, ","))
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl ring: %v\n", err)
		return 1
	}
	if topo.Replicas < 1 || len(topo.Owners) != topo.Partitions*topo.Replicas {
		fmt.Fprintln(stderr, "fcapctl ring: the node sent an inconsistent table")
		return 1
	}
	type memberOut struct {
		Name      string `json:"name"`
		Addr      string `json:"addr"`
		State     string `json:"state"`
		Primaries int    `json:"primaries"`
		Backups   int    `json:"backups"`
	}
	members := make([]memberOut, len(topo.Members))
	for i, m := range topo.Members {
		members[i] = memberOut{Name: m.Name, Addr: m.Addr, State: stateName(m.State)}
	}
	owners := make([][]string, topo.Partitions)
	for p := range topo.Partitions {
		for r := range topo.Replicas {
			o := topo.Owners[p*topo.Replicas+r]
			if o == proto.NoOwner || int(o) >= len(members) {
				continue
			}
			if r == 0 {
				members[o].Primaries++
			} else {
				members[o].Backups++
			}
			owners[p] = append(owners[p], members[o].Name)
		}
	}
	if nf.asJSON {
		out := map[string]any{"epoch": epochString(topo.Epoch), "partitions": topo.Partitions, "replicas": topo.Replicas, "members": members}
		if *all {
			out["owners"] = owners
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "ring epoch %016x, %d partitions, %d replicas\n\n", topo.Epoch, topo.Partitions, topo.Replicas)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDR\tSTATE\tPRIMARY\tBACKUP\tSHARE")
	for _, m := range members {
		share := float64(m.Primaries) / float64(max(topo.Partitions, 1)) * 100
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.1f%%\t%s\n", m.Name, m.Addr, m.State, m.Primaries, m.Backups, share, strings.Repeat("#", int(share/2+0.5)))
	}
	tw.Flush()
	if *all {
		fmt.Fprintln(stdout)
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tOWNERS (primary first)")
		for p, o := range owners {
			fmt.Fprintf(tw, "%d\t%s\n", p, strings.Join(o, " "))
		}
		tw.Flush()
	}
	return 0
}

func stateName(s uint8) string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return "state-" + strconv.Itoa(int(s))
}
