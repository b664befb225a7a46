package security

import (
	"context"
	"crypto/tls"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// tlsArgs are fcapd's flags for a data plane over TLS that requires
// client certificates of ca.
func tlsArgs(t *testing.T, ca *pki) []string {
	cert, key := ca.issue(t, "node")
	return []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca.CA, "--tls-ca", ca.CA}
}

func tlsClientConfig(t *testing.T, ca *pki, clientOf *pki) *tls.Config {
	t.Helper()
	var cert, key string
	if clientOf != nil {
		cert, key = clientOf.issue(t, "adserver")
	}
	cfg, err := client.LoadTLS(ca.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newTLSClient(t *testing.T, nodes []*cluster.Node, cfg *tls.Config) *client.Client {
	t.Helper()
	return cluster.NewClient(t, cluster.Seeds(nodes[0], nodes[1]), func(c *client.Config) { c.TLS = cfg })
}

// TestTLSDataPlane runs two nodes whose data plane is TLS only and
// requires client certificates, replicating to each other over it. A
// client with a certificate of the cluster's CA is served, strict caps
// included (they wait for the backup, so node-to-node TLS works). A
// plaintext client, a client without a certificate and one whose
// certificate another CA signed are refused, and their requests count
// nothing.
func TestTLSDataPlane(t *testing.T) {
	ca := newPKI(t, "cluster")
	nodes := cluster.StartCluster(t, 2, cluster.Options{Replicas: 2, Args: tlsArgs(t, ca)})

	strictCap := fcap.Cap{Scope: "campaign", ID: "tls", Limit: 1, Window: fcap.MaxWindow, Mode: fcap.Strict}
	refused := "viewer-refused"
	try := func(a *client.Admin) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var errs []error
		for _, n := range nodes {
			var res proto.AllowResult
			err := a.Call(ctx, n.Data, &proto.Allow{Viewer: refused, Caps: []fcap.Cap{strictCap}}, &res)
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}

	err := try(&client.Admin{})
	if !errors.Is(err, proto.ErrUnsupported) || !strings.Contains(err.Error(), "TLS only") {
		t.Errorf("plaintext client: %v, want ErrUnsupported saying TLS only", err)
	}
	if err := try(&client.Admin{TLS: tlsClientConfig(t, ca, nil)}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client without a certificate: %v, want a certificate error", err)
	}
	if err := try(&client.Admin{TLS: tlsClientConfig(t, ca, newPKI(t, "stranger"))}); err == nil {
		t.Error("client with another CA's certificate was served")
	}
	// A node counts a failed handshake once it has told the client (an
	// alert, or the plaintext client's error frame): the client can see
	// the refusal before the count.
	cluster.Eventually(t, 30*time.Second, func() bool {
		return nodes[0].Metric("fcap_node_tls_handshake_failures_total")+nodes[1].Metric("fcap_node_tls_handshake_failures_total") >= 6
	}, "refused handshakes not counted")

	c := newTLSClient(t, nodes, tlsClientConfig(t, ca, ca))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, want := range []bool{true, false} {
		v, err := c.Allow(ctx, refused, []fcap.Cap{strictCap})
		if err != nil || v.Allowed != want || v.FailClosed || v.FailOpen {
			t.Fatalf("strict allow %d over TLS: %+v, %v; want allowed %v, answered", i, v, err, want)
		}
	}

	// fcapctl needs the CA and a certificate too.
	ctl := cluster.Tool(t, "fcapctl")
	if out, err := exec.Command(ctl, "status", "--addr", nodes[0].Data).CombinedOutput(); err == nil {
		t.Errorf("fcapctl status without TLS succeeded:\n%s", out)
	}
	cert, key := ca.issue(t, "operator")
	out, err := exec.Command(ctl, "status", "--addr", nodes[0].Data, "--tls-ca", ca.CA, "--tls-cert", cert, "--tls-key", key).CombinedOutput()
	if err != nil || strings.Contains(string(out), "unreachable") || !strings.Contains(string(out), "n2") {
		t.Errorf("fcapctl status over TLS: %v\n%s", err, out)
	}
}
