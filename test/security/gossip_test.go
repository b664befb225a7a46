package security

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/gossip"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// newKey returns a random AES-256 gossip key in base64.
func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func fingerprint(t *testing.T, b64 string) string {
	t.Helper()
	k, err := gossip.ParseKey(b64)
	if err != nil {
		t.Fatal(err)
	}
	return gossip.KeyFingerprint(k)
}

// topology asks a node for its ring.
func topology(t *testing.T, n *cluster.Node) *proto.Topology {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var topo proto.Topology
	if err := client.Call(ctx, n.Data, &proto.TopologyRequest{}, &topo); err != nil {
		t.Fatalf("topology of %s: %v", n.Name, err)
	}
	return &topo
}

func memberNames(topo *proto.Topology) []string {
	var names []string
	for _, m := range topo.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// TestGossipWithoutTheKeyCannotJoin starts a cluster whose gossip is
// encrypted, then a node with another key and a node with none, both
// given the cluster as seeds. Once the cluster has refused their join
// attempts (its logs say so, and theirs say no seed answered), neither
// is a member and the cluster's ring has not changed.
func TestGossipWithoutTheKeyCannotJoin(t *testing.T) {
	key := newKey(t)
	nodes := cluster.StartCluster(t, 2, cluster.Options{GossipKey: key})
	before := topology(t, nodes[0])
	seeds := []string{nodes[0].Gossip, nodes[1].Gossip}

	wrong := cluster.Start(t, "wrong-key", cluster.Options{Seeds: seeds, GossipKey: newKey(t)})
	plain := cluster.Start(t, "no-key", cluster.Options{Seeds: seeds})

	logs := func() string { return nodes[0].Logs() + nodes[1].Logs() }
	cluster.Eventually(t, 60*time.Second, func() bool {
		l := logs()
		return strings.Contains(l, "no installed keys could decrypt") &&
			strings.Contains(l, "remote state is not encrypted") &&
			strings.Count(wrong.Logs(), "seed did not answer") >= 4 &&
			strings.Count(plain.Logs(), "seed did not answer") >= 4
	}, "the cluster never refused the strangers' joins (or they never tried)")

	for _, n := range nodes {
		after := topology(t, n)
		if got := memberNames(after); !slices.Equal(got, []string{"n1", "n2"}) {
			t.Errorf("%s's ring members are %v, want [n1 n2]", n.Name, got)
		}
		if after.Epoch != before.Epoch {
			t.Errorf("%s's ring epoch moved from %x to %x", n.Name, before.Epoch, after.Epoch)
		}
		if m := n.Metric(`fcap_ring_members{state="active"}`) + n.Metric(`fcap_ring_members{state="joining"}`); m != 2 {
			t.Errorf("%s counts %v members, want 2", n.Name, m)
		}
	}
	for _, s := range []*cluster.Node{wrong, plain} {
		if got := memberNames(topology(t, s)); !slices.Equal(got, []string{s.Name}) {
			t.Errorf("%s sees members %v: it joined", s.Name, got)
		}
	}
}

type keyRow struct {
	Node    string   `json:"node"`
	Primary string   `json:"primary"`
	Keys    []string `json:"keys"`
	Error   string   `json:"error"`
}

// fcapctl runs fcapctl and returns its standard output; it fails the
// test if fcapctl fails.
func fcapctl(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(cluster.Tool(t, "fcapctl"), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("fcapctl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

func listKeys(t *testing.T, addr string) []keyRow {
	t.Helper()
	var rows []keyRow
	out := fcapctl(t, "gossip-key", "list", "--json", "--addr", addr)
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("fcapctl gossip-key list --json printed %q: %v", out, err)
	}
	return rows
}

// TestGossipKeyRotation rotates the gossip key of a running three-node
// cluster with fcapctl (install the new key, use it, remove the old
// one), checks every member's keyring after each step, and then starts a
// node that holds only the new key: it joins. Before the rotation such a
// node could not (TestGossipWithoutTheKeyCannotJoin).
func TestGossipKeyRotation(t *testing.T) {
	oldKey, newKey := newKey(t), newKey(t)
	oldFP, newFP := fingerprint(t, oldKey), fingerprint(t, newKey)
	nodes := cluster.StartCluster(t, 3, cluster.Options{GossipKey: oldKey})
	addr := nodes[0].Data

	check := func(step, primary string, keys ...string) {
		t.Helper()
		rows := listKeys(t, addr)
		if len(rows) != 3 {
			t.Fatalf("after %s: %d members listed, want 3: %+v", step, len(rows), rows)
		}
		for _, r := range rows {
			got := slices.Clone(r.Keys)
			slices.Sort(got)
			want := slices.Clone(keys)
			slices.Sort(want)
			if r.Error != "" || r.Primary != primary || !slices.Equal(got, want) {
				t.Fatalf("after %s: %s has primary %s keys %v (error %q), want primary %s keys %v", step, r.Node, r.Primary, r.Keys, r.Error, primary, keys)
			}
		}
	}
	check("start", oldFP, oldFP)

	keyFile := t.TempDir() + "/new.key"
	writeFile(t, keyFile, newKey)
	fcapctl(t, "gossip-key", "install", "--addr", addr, "--key-file", keyFile)
	check("install", oldFP, oldFP, newFP)
	fcapctl(t, "gossip-key", "use", newKey, "--addr", addr)
	check("use", newFP, oldFP, newFP)
	fcapctl(t, "gossip-key", "remove", oldKey, "--addr", addr)
	check("remove", newFP, newFP)

	// Gossip still flows, under the new key only: a node that holds
	// nothing else joins, and every member sees it.
	seeds := []string{nodes[0].Gossip, nodes[1].Gossip, nodes[2].Gossip}
	joiner := cluster.Start(t, "n4", cluster.Options{Seeds: seeds, GossipKey: newKey})
	cluster.WaitActive(t, append(nodes, joiner), 4)
	for _, n := range append(nodes, joiner) {
		if got := memberNames(topology(t, n)); !slices.Equal(got, []string{"n1", "n2", "n3", "n4"}) {
			t.Errorf("%s sees members %v", n.Name, got)
		}
	}
}

// TestGossipKeyRefusals: fcapctl gossip-key fails clearly on a cluster
// whose gossip is not encrypted, and when asked to remove the key in use,
// and the keyring is unchanged.
func TestGossipKeyRefusals(t *testing.T) {
	plain := cluster.Start(t, "plain", cluster.Options{})
	out, err := exec.Command(cluster.Tool(t, "fcapctl"), "gossip-key", "list", "--addr", plain.Data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "gossip encryption is off") {
		t.Errorf("gossip-key list on a plain node: err %v, output %s", err, out)
	}

	key := newKey(t)
	enc := cluster.Start(t, "enc", cluster.Options{GossipKey: key})
	out, err = exec.Command(cluster.Tool(t, "fcapctl"), "gossip-key", "remove", key, "--addr", enc.Data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "primary key") {
		t.Errorf("removing the key in use: err %v, output %s", err, out)
	}
	out, err = exec.Command(cluster.Tool(t, "fcapctl"), "gossip-key", "use", newKey(t), "--addr", enc.Data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not in the keyring") {
		t.Errorf("using a key never installed: err %v, output %s", err, out)
	}
	rows := listKeys(t, enc.Data)
	if len(rows) != 1 || rows[0].Primary != fingerprint(t, key) || len(rows[0].Keys) != 1 {
		t.Errorf("keyring changed by refused requests: %+v", rows)
	}
}
