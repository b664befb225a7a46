package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
	"github.com/fcap-io/fcap/ring"
)

// Live reconciliation: every node digests what each viewer of its
// partitions counts at one instant (proto.Verify), from RAM and from
// what its log replays to. fcapctl compares a partition's owners with
// each other and each node's RAM with its log. Replication is
// asynchronous for soft caps and writes go on, so a difference is only
// a suspicion at first: the viewers behind it are fetched twice, a
// settle interval apart, and a viewer is reported as drifting only when
// it differs both times with the same digests both times (nothing wrote
// to it in between); one that changed is "in flight".

// verifyOpts are the live verify's flags.
type verifyOpts struct {
	addrs   []string
	admin   *rpc.Admin
	settle  time.Duration
	noLog   bool
	show    int
	timeout time.Duration
}

// driftViewer is one viewer whose copies disagree.
type driftViewer struct {
	Partition int               `json:"partition"`
	Key       string            `json:"key"`
	Kind      string            `json:"kind"` // "replicas" or "log"
	Digests   map[string]string `json:"digests"`
}

// verifyReport is what live verify found.
type verifyReport struct {
	Epoch           string        `json:"epoch"`
	Now             int64         `json:"now"`
	Nodes           int           `json:"nodes"`
	Unreachable     []string      `json:"unreachable,omitempty"`
	Partitions      int           `json:"partitions"`
	NotHeld         []string      `json:"not_held,omitempty"` // "node/partition" still being received
	Viewers         uint64        `json:"viewers"`            // viewer copies compared (RAM)
	LogChecked      []string      `json:"log_checked"`        // nodes whose log was replayed
	LogErrors       []string      `json:"log_errors,omitempty"`
	SuspectReplicas int           `json:"suspect_partitions_replicas"`
	SuspectLog      int           `json:"suspect_partitions_log"`
	InFlight        int           `json:"in_flight"` // viewers that differed but were being written
	Drift           []driftViewer `json:"drift"`
	DriftTotal      int           `json:"drift_total"`
	Truncated       bool          `json:"truncated,omitempty"`
}

func runVerifyLive(o verifyOpts, asJSON bool, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	topo, err := topology(ctx, o.admin, o.addrs)
	if err != nil {
		fmt.Fprintf(stderr, "fcapctl verify: %v\n", err)
		return 1
	}
	if topo.Replicas < 1 || len(topo.Owners) != topo.Partitions*topo.Replicas {
		fmt.Fprintln(stderr, "fcapctl verify: the node sent an inconsistent table")
		return 1
	}
	P, R := topo.Partitions, topo.Replicas
	names := make([]string, len(topo.Members))
	for i, m := range topo.Members {
		names[i] = m.Name
	}
	owners := make([][]int, P) // member indices, primary first
	mine := make([][]uint32, len(topo.Members))
	for p := range P {
		for r := range R {
			if x := topo.Owners[p*R+r]; x != proto.NoOwner && int(x) < len(topo.Members) {
				owners[p] = append(owners[p], int(x))
				mine[x] = append(mine[x], uint32(p))
			}
		}
	}
	rep := verifyReport{Epoch: epochString(topo.Epoch), Now: time.Now().UnixMilli(), Partitions: P}
	ask := func(i int, m *proto.Verify) (*proto.VerifyResult, error) {
		var res proto.VerifyResult
		a := *o.admin
		a.MaxFrame = 64 << 20
		err := a.Call(ctx, topo.Members[i].Addr, m, &res)
		return &res, err
	}

	// Round 1: partition digests from every node, with its log.
	type partDigest = proto.PartitionDigest
	digests := make([]map[int]partDigest, len(topo.Members))
	for i := range topo.Members {
		if len(mine[i]) == 0 || topo.Members[i].Addr == "" {
			continue
		}
		rep.Nodes++
		res, err := ask(i, &proto.Verify{Now: rep.Now, Partitions: mine[i], Log: !o.noLog})
		if err != nil {
			rep.Unreachable = append(rep.Unreachable, fmt.Sprintf("%s: %v", names[i], err))
			continue
		}
		if res.Logged {
			rep.LogChecked = append(rep.LogChecked, names[i])
		}
		if res.LogError != "" {
			rep.LogErrors = append(rep.LogErrors, fmt.Sprintf("%s: %s", names[i], res.LogError))
		}
		digests[i] = map[int]partDigest{}
		for _, d := range res.Partitions {
			digests[i][int(d.Partition)] = d
			rep.Viewers += d.Viewers
			if !d.Held {
				rep.NotHeld = append(rep.NotHeld, fmt.Sprintf("%s/%d", names[i], d.Partition))
			}
		}
	}

	// Suspects: partitions whose held copies disagree, and per node the
	// partitions whose RAM disagrees with its log.
	suspect := map[int]bool{}
	logSuspect := make([]map[int]bool, len(topo.Members))
	for p := range P {
		var first *partDigest
		for _, i := range owners[p] {
			d, ok := digests[i][p]
			if !ok || !d.Held {
				continue
			}
			if first == nil {
				first = &d
			} else if d.Sum != first.Sum || d.Viewers != first.Viewers {
				suspect[p] = true
			}
			if (d.LogSum != d.Sum || d.LogViewers != d.Viewers) && slices.Contains(rep.LogChecked, names[i]) {
				if logSuspect[i] == nil {
					logSuspect[i] = map[int]bool{}
				}
				logSuspect[i][p] = true
			}
		}
	}
	rep.SuspectReplicas = len(suspect)
	for _, m := range logSuspect {
		rep.SuspectLog += len(m)
	}

	// Rounds 2 and 3: the suspects' viewers, a settle interval apart.
	if len(suspect) > 0 || rep.SuspectLog > 0 {
		type viewerRound = map[int]map[uint64]proto.ViewerDigest // member -> key -> digest
		fetch := func() viewerRound {
			out := viewerRound{}
			for i := range topo.Members {
				var ps []uint32
				for _, p := range mine[i] {
					if suspect[int(p)] || logSuspect[i][int(p)] {
						ps = append(ps, p)
					}
				}
				if len(ps) == 0 || digests[i] == nil {
					continue
				}
				out[i] = map[uint64]proto.ViewerDigest{}
				for len(ps) > 0 {
					batch := ps[:min(len(ps), 8)]
					ps = ps[len(batch):]
					res, err := ask(i, &proto.Verify{Now: rep.Now, Partitions: batch, Viewers: true, Log: len(logSuspect[i]) > 0})
					if err != nil {
						rep.Unreachable = append(rep.Unreachable, fmt.Sprintf("%s: %v", names[i], err))
						delete(out, i)
						break
					}
					rep.Truncated = rep.Truncated || res.Truncated
					for _, v := range res.Viewers {
						out[i][v.Key] = v
					}
				}
			}
			return out
		}
		sleep(ctx, o.settle)
		a := fetch()
		sleep(ctx, o.settle)
		b := fetch()
		partOf := func(key uint64) int { return ring.PartitionOf(key, P) }
		// Replica drift: held copies of a suspect partition's viewer.
		keys := map[uint64]bool{}
		for _, round := range []viewerRound{a, b} {
			for _, vs := range round {
				for k := range vs {
					keys[k] = true
				}
			}
		}
		sorted := make([]uint64, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			p := partOf(k)
			if suspect[p] {
				differs, stable := true, true
				ds := map[string]string{}
				for _, round := range []viewerRound{a, b} {
					var first *uint64
					same := true
					for _, i := range owners[p] {
						if d, ok := digests[i][p]; !ok || !d.Held || round[i] == nil {
							continue
						}
						s := round[i][k].Sum
						if first == nil {
							first = &s
						} else if s != *first {
							same = false
						}
					}
					differs = differs && !same
				}
				for _, i := range owners[p] {
					if a[i] != nil && b[i] != nil {
						if a[i][k].Sum != b[i][k].Sum {
							stable = false
						}
						ds[names[i]] = digestString(b[i][k].Sum)
					}
				}
				switch {
				case differs && stable:
					rep.DriftTotal++
					if len(rep.Drift) < o.show {
						rep.Drift = append(rep.Drift, driftViewer{Partition: p, Key: fmt.Sprintf("%016x", k), Kind: "replicas", Digests: ds})
					}
				case differs:
					rep.InFlight++
				}
			}
			for i := range topo.Members {
				if !logSuspect[i][p] || a[i] == nil || b[i] == nil {
					continue
				}
				va, vb := a[i][k], b[i][k]
				if va.Sum != va.Log && vb.Sum != vb.Log {
					if va == vb {
						rep.DriftTotal++
						if len(rep.Drift) < o.show {
							rep.Drift = append(rep.Drift, driftViewer{Partition: p, Key: fmt.Sprintf("%016x", k), Kind: "log",
								Digests: map[string]string{names[i] + " ram": digestString(vb.Sum), names[i] + " log": digestString(vb.Log)}})
						}
					} else {
						rep.InFlight++
					}
				}
			}
		}
	}
	sort.Strings(rep.Unreachable)

	status := 0
	if len(rep.Unreachable) > 0 || rep.DriftTotal > 0 || len(rep.LogErrors) > 0 {
		status = 1
	}
	if asJSON {
		if rep.Drift == nil {
			rep.Drift = []driftViewer{}
		}
		if rep.LogChecked == nil {
			rep.LogChecked = []string{}
		}
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return status
	}
	fmt.Fprintf(stdout, "ring epoch %s: %d node(s), %d partitions, %d viewer copies compared at %s\n",
		rep.Epoch, rep.Nodes, rep.Partitions, rep.Viewers, time.UnixMilli(rep.Now).UTC().Format(time.RFC3339Nano))
	if o.noLog {
		fmt.Fprintln(stdout, "log: not checked (--no-log)")
	} else {
		fmt.Fprintf(stdout, "log: replayed and compared on %d node(s) %v (nodes without --data-dir keep none)\n", len(rep.LogChecked), rep.LogChecked)
	}
	for _, u := range rep.Unreachable {
		fmt.Fprintf(stdout, "UNREACHABLE %s\n", u)
	}
	for _, e := range rep.LogErrors {
		fmt.Fprintf(stdout, "LOG ERROR %s\n", e)
	}
	if len(rep.NotHeld) > 0 {
		fmt.Fprintf(stdout, "not compared, still being received: %s\n", strings.Join(rep.NotHeld, " "))
	}
	fmt.Fprintf(stdout, "suspect partitions: %d between replicas, %d between RAM and log; viewers still being written: %d\n",
		rep.SuspectReplicas, rep.SuspectLog, rep.InFlight)
	if rep.DriftTotal > 0 {
		fmt.Fprintf(stdout, "DRIFT: %d viewers differ, unchanged over %v (first %d):\n", rep.DriftTotal, 2*o.settle, len(rep.Drift))
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tVIEWER KEY\tBETWEEN\tDIGESTS")
		for _, d := range rep.Drift {
			var parts []string
			for n, s := range d.Digests {
				parts = append(parts, n+"="+s)
			}
			sort.Strings(parts)
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", d.Partition, d.Key, d.Kind, strings.Join(parts, " "))
		}
		tw.Flush()
		fmt.Fprintln(stdout, `"fcapctl keys VIEWER" shows a viewer's counters on each owner (viewer keys are hashes: find the id in your logs).`)
	}
	if rep.Truncated {
		fmt.Fprintln(stdout, "note: some answers held too many viewers and were cut short")
	}
	if status == 0 {
		fmt.Fprintln(stdout, "ok: no drift")
	}
	return status
}

// digestString prints a digest, "-" for a viewer that counts nothing.
func digestString(d uint64) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%016x", d)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
