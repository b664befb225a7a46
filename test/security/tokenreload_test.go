package security

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/httpapi"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// TestTokensReloadOnSIGHUP rotates every token of a running two-node
// cluster without a restart: an ad server's token B and a peer token P2
// are added to the tokens file and SIGHUP makes the data plane and the
// JSON API accept B; then the old tokens A and P1 are removed and SIGHUP
// makes both refuse A, new connections and A's connection already up
// alike, while the nodes still replicate strict caps to each other with
// P2. A reload of a file that does not parse keeps the tokens in place
// and is counted.
func TestTokensReloadOnSIGHUP(t *testing.T) {
	const (
		tokA  = "adserver-a-0123456789"
		tokB  = "adserver-b-0123456789"
		peer1 = "peer-one-0123456789"
		peer2 = "peer-two-0123456789"
	)
	file := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, file, "adserver "+tokA+"\npeer "+peer1)
	nodes := cluster.StartCluster(t, 2, cluster.Options{Replicas: 2, Args: []string{"--tokens-file", file}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reload := func() {
		for _, n := range nodes {
			n.Reload()
		}
	}
	ping := func(n *cluster.Node, token string) error {
		return (&client.Admin{Token: token}).Call(ctx, n.Data, &proto.Ping{}, &proto.Pong{})
	}
	// api allows through n's JSON API with token and returns the status
	// and whether the verdict was the cluster's (not a failure policy's).
	api := func(n *cluster.Node, token string) (int, bool) {
		body := `{"viewer":"v-api","caps":[{"scope":"campaign","id":"reload","limit":1000,"window":3600000}]}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+n.HTTP+"/v1/allow", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Fcap-Timeout-Ms", "2000")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v httpapi.Verdict
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, !v.FailOpen && !v.FailClosed
	}
	for _, n := range nodes {
		if err := ping(n, tokB); !errors.Is(err, proto.ErrUnauthenticated) {
			t.Fatalf("%s before the reload: token B %v, want %v", n.Name, err, proto.ErrUnauthenticated)
		}
		if st, _ := api(n, tokB); st != http.StatusUnauthorized {
			t.Fatalf("%s's API before the reload: token B status %d, want 401", n.Name, st)
		}
	}

	// Add B and P2 (the last peer token: the one the nodes present now).
	writeFile(t, file, "adserver "+tokA+"\nadserver "+tokB+"\npeer "+peer1+"\npeer "+peer2)
	reload()
	for _, n := range nodes {
		cluster.Eventually(t, 30*time.Second, func() bool { return ping(n, tokB) == nil }, "%s never accepted token B", n.Name)
		cluster.Eventually(t, 30*time.Second, func() bool {
			st, answered := api(n, tokB)
			return st == http.StatusOK && answered
		}, "%s's JSON API never answered token B", n.Name)
	}

	// A file that does not load (no peer token: the nodes could not
	// replicate) keeps the table in place, and the failure is counted.
	writeFile(t, file, "adserver "+tokB)
	nodes[0].Reload()
	cluster.Eventually(t, 30*time.Second, func() bool {
		return nodes[0].Metric(`fcap_reload_errors_total{what="tokens"}`) == 1
	}, "%s never counted the failed reload", nodes[0].Name)
	for _, tok := range []string{tokA, tokB} {
		if err := ping(nodes[0], tok); err != nil {
			t.Fatalf("after a failed reload: %v, want every token of the table in place accepted", err)
		}
	}

	// A's connection, up before A is removed.
	conn, err := (&client.Admin{Token: tokA}).Dial(ctx, nodes[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Call(ctx, &proto.Ping{}, &proto.Pong{}); err != nil {
		t.Fatal(err)
	}

	// Remove A and P1.
	writeFile(t, file, "adserver "+tokB+"\npeer "+peer2)
	reload()
	for _, n := range nodes {
		cluster.Eventually(t, 30*time.Second, func() bool {
			return errors.Is(ping(n, tokA), proto.ErrUnauthenticated)
		}, "%s still accepts token A on new connections", n.Name)
		cluster.Eventually(t, 30*time.Second, func() bool {
			st, _ := api(n, tokA)
			return st == http.StatusUnauthorized
		}, "%s's JSON API still accepts token A", n.Name)
		// The API's own client presented A: it follows the table to B.
		cluster.Eventually(t, 30*time.Second, func() bool {
			st, answered := api(n, tokB)
			return st == http.StatusOK && answered
		}, "%s's JSON API never answered token B after A was removed", n.Name)
	}
	if err := conn.Call(ctx, &proto.Ping{}, &proto.Pong{}); !errors.Is(err, proto.ErrUnauthenticated) {
		t.Errorf("a connection of the removed token A: %v, want %v", err, proto.ErrUnauthenticated)
	}

	// Strict writes wait for the backup: the nodes reach each other with
	// P2 once their P1 connections are refused.
	c := cluster.NewClient(t, cluster.Seeds(nodes...), func(c *client.Config) { c.Token = tokB })
	strictCap := fcap.Cap{Scope: "campaign", ID: "reload-strict", Limit: 1000, Window: fcap.MaxWindow, Mode: fcap.Strict}
	for i := range 20 {
		cluster.Eventually(t, 30*time.Second, func() bool {
			v, err := c.Allow(ctx, "viewer-strict-"+string(rune('a'+i)), []fcap.Cap{strictCap})
			return err == nil && v.Allowed && !v.FailClosed && !v.FailOpen
		}, "strict allows never answered after the peer token rotated")
	}
	if got := nodes[1].Metric(`fcap_reload_errors_total{what="tokens"}`); got != 0 {
		t.Errorf("%s counted %v failed reloads, want 0", nodes[1].Name, got)
	}
}
