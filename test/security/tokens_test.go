package security

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

const (
	adToken   = "ad-0123456789abcdef"
	opToken   = "op-0123456789abcdef"
	peerToken = "peer-0123456789abcdef"
)

// TestTokens runs two nodes that require tokens and replicate strict
// caps to each other with their peer token. Each refusal is checked on
// a real process, and none of them changes anything: no token, an
// unknown token, an ad server asking for an operator's request (status,
// drain, gossip keys) or a peer's (replicate). An ad server's token is
// served, an operator's token runs fcapctl.
func TestTokens(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, "# role token\nadserver "+adToken+"\noperator "+opToken+"\npeer "+peerToken)
	nodes := cluster.StartCluster(t, 2, cluster.Options{Replicas: 2, Args: []string{"--tokens-file", tokens}})

	strictCap := fcap.Cap{Scope: "campaign", ID: "tokens", Limit: 1, Window: fcap.MaxWindow, Mode: fcap.Strict}
	viewer := "viewer-refused"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	allow := &proto.Allow{Viewer: viewer, Caps: []fcap.Cap{strictCap}}

	for _, c := range []struct {
		name  string
		token string
		req   proto.Message
		resp  proto.Message
		want  error
	}{
		{"no token", "", allow, &proto.AllowResult{}, proto.ErrUnauthenticated},
		{"unknown token", "not-a-token-at-all-0000", allow, &proto.AllowResult{}, proto.ErrUnauthenticated},
		{"ad server asks status", adToken, &proto.StatusRequest{}, &proto.Status{}, proto.ErrPermissionDenied},
		{"ad server drains", adToken, &proto.Drain{}, &proto.DrainResult{}, proto.ErrPermissionDenied},
		{"ad server lists gossip keys", adToken, &proto.GossipKey{Op: proto.GossipKeyList}, &proto.GossipKeyResult{}, proto.ErrPermissionDenied},
		{"ad server replicates", adToken, &proto.Replicate{From: "n1"}, &proto.ReplicateResult{}, proto.ErrPermissionDenied},
		{"peer allows", peerToken, allow, &proto.AllowResult{}, proto.ErrPermissionDenied},
	} {
		for _, n := range nodes {
			err := (&client.Admin{Token: c.token}).Call(ctx, n.Data, c.req, c.resp)
			if !errors.Is(err, c.want) {
				t.Errorf("%s on %s: %v, want %v", c.name, n.Name, err, c.want)
			}
		}
	}
	if got := nodes[0].Metric("fcap_node_auth_failures_total") + nodes[1].Metric("fcap_node_auth_failures_total"); got < 14 {
		t.Errorf("%v refusals counted, want 14", got)
	}
	for _, n := range nodes {
		if !n.Ready() {
			t.Errorf("%s is not ready after the refused drain", n.Name)
		}
	}

	// The ad server's token is served, strict caps included: they wait
	// for the backup, which the nodes reach with their peer token. The
	// refused Allows counted nothing.
	cfg := cluster.ClientConfig(nodes[0].Data, nodes[1].Data)
	cfg.Token = adToken
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		v, err := c.Allow(ctx, viewer, []fcap.Cap{strictCap})
		if err != nil || v.Allowed != want || v.FailClosed || v.FailOpen {
			t.Fatalf("strict allow %d with the ad server's token: %+v, %v; want allowed %v, answered", i, v, err, want)
		}
	}

	// A client with an unknown token never gets ready, and says why.
	// A dial of a second, time for a busy node's refusal to be the error
	// (New waits twice that for a node that refuses it).
	bad := cluster.ClientConfig(nodes[0].Data)
	bad.DialTimeout = time.Second
	bad.Token = "not-a-token-at-all-0000"
	bc, err := client.New(bad)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close(context.Background())
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if err := bc.WaitReady(short); err == nil || !strings.Contains(err.Error(), "unknown token") {
		t.Errorf("a client with an unknown token: WaitReady %v, want an error naming the refusal", err)
	}

	ctl := cluster.Tool(t, "fcapctl")
	for _, c := range []struct {
		token string
		ok    bool
	}{{opToken, true}, {adToken, false}, {"", false}} {
		args := []string{"status", "--addr", nodes[0].Data}
		if c.token != "" {
			file := filepath.Join(dir, "ctl-token")
			writeFile(t, file, c.token)
			args = append(args, "--token-file", file)
		}
		out, err := exec.Command(ctl, args...).CombinedOutput()
		if ok := err == nil && !strings.Contains(string(out), "unreachable"); ok != c.ok {
			t.Errorf("fcapctl status with token %q: %v\n%s", c.token, err, out)
		}
	}
}

// TestTokenlessNodeAcceptsHello: a client configured with a token still
// works against a node that requires none.
func TestTokenlessNodeAcceptsHello(t *testing.T) {
	n := cluster.Start(t, "plain", cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := (&client.Admin{Token: adToken}).Call(ctx, n.Data, &proto.StatusRequest{}, &proto.Status{}); err != nil {
		t.Errorf("a token on a node without tokens: %v", err)
	}
}
