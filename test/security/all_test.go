package security

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// TestSecuredCluster turns everything on at once, as SECURITY.md tells
// operators to: encrypted gossip, TLS with client certificates, tokens.
// The nodes form a cluster and replicate strict caps; an ad server with a
// certificate and its token is served; fcapctl with a certificate and
// the operator token lists and installs gossip keys, and without the
// token is refused.
func TestSecuredCluster(t *testing.T) {
	dir := t.TempDir()
	ca := newPKI(t, "secured")
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, "adserver "+adToken+"\noperator "+opToken+"\npeer "+peerToken)
	args := append(tlsArgs(t, ca), "--tokens-file", tokens)
	nodes := cluster.StartCluster(t, 2, cluster.Options{Replicas: 2, GossipKey: newKey(t), Args: args})

	cfg := cluster.ClientConfig(nodes[0].Data, nodes[1].Data)
	cfg.TLS = tlsClientConfig(t, ca, ca)
	cfg.Token = adToken
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	strictCap := fcap.Cap{Scope: "campaign", ID: "secured", Limit: 1, Window: fcap.MaxWindow, Mode: fcap.Strict}
	for i, want := range []bool{true, false} {
		v, err := c.Allow(ctx, "viewer", []fcap.Cap{strictCap})
		if err != nil || v.Allowed != want || v.FailClosed || v.FailOpen {
			t.Fatalf("strict allow %d: %+v, %v; want allowed %v, answered", i, v, err, want)
		}
	}

	// Links whose device and viewer have different primaries make one
	// node ask the other (LinkDevice): over TLS with the peer token.
	crossed := 0
	for i := range 10 {
		device, viewer := fmt.Sprint("secured-device-", i), fmt.Sprint("secured-person-", i)
		if _, err := c.Link(ctx, device, viewer); err != nil {
			t.Fatalf("Link(%s, %s) on the secured cluster: %v", device, viewer, err)
		}
		if got, err := c.Resolve(ctx, device); err != nil || got != viewer {
			t.Fatalf("Resolve(%s) = %q %v", device, got, err)
		}
		r := c.Ring()
		_, do := r.Lookup(device)
		_, vo := r.Lookup(viewer)
		if do[0] != vo[0] {
			crossed++
		}
	}
	if crossed == 0 {
		t.Error("no link crossed nodes: the peer path was not exercised")
	}

	cert, key := ca.issue(t, "operator")
	opFile, adFile := filepath.Join(dir, "op-token"), filepath.Join(dir, "ad-token")
	writeFile(t, opFile, opToken)
	writeFile(t, adFile, adToken)
	conn := []string{"--addr", nodes[0].Data, "--tls-ca", ca.CA, "--tls-cert", cert, "--tls-key", key}
	ctl := cluster.Tool(t, "fcapctl")

	next := newKey(t)
	fcapctl(t, append([]string{"gossip-key", "install", next, "--token-file", opFile}, conn...)...)
	var rows []keyRow
	out := fcapctl(t, append([]string{"gossip-key", "list", "--json", "--token-file", opFile}, conn...)...)
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(rows) != 2 || len(rows[0].Keys) != 2 || len(rows[1].Keys) != 2 {
		t.Errorf("after install over TLS with the operator token: %+v", rows)
	}

	b, err := exec.Command(ctl, append([]string{"gossip-key", "install", newKey(t), "--token-file", adFile}, conn...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "permission denied") {
		t.Errorf("gossip-key install with the ad server's token: %v\n%s", err, b)
	}
}
