package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// TestTLSReloadOnSIGHUP renews a running cluster's certificates without
// a restart: the nodes' certificate files are replaced by ones another CA
// signed, that CA is added to the client-CA and peer-CA bundles, and
// SIGHUP makes new handshakes use them (the nodes then present the new
// certificate, accept clients of the new CA, and still replicate to each
// other, which strict caps prove). A reload whose files do not parse
// keeps the material that was loaded.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	oldCA, newCA := newPKI(t, "old"), newPKI(t, "new")
	dir := t.TempDir()
	certFile, keyFile, bundle := filepath.Join(dir, "node.pem"), filepath.Join(dir, "node-key.pem"), filepath.Join(dir, "cas.pem")
	install := func(ca *pki, cas ...*pki) {
		cert, key := ca.issue(t, "node")
		copyFile(t, cert, certFile)
		copyFile(t, key, keyFile)
		var b []byte
		for _, c := range cas {
			pem, err := os.ReadFile(c.CA)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, pem...)
		}
		writeFile(t, bundle, string(b))
	}
	install(oldCA, oldCA)
	args := []string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", bundle, "--tls-ca", bundle}
	nodes := cluster.StartCluster(t, 2, cluster.Options{Replicas: 2, Args: args})

	issuer := func(n *cluster.Node, cfg *tls.Config) (string, error) {
		d := tls.Dialer{Config: cfg}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := d.DialContext(ctx, "tcp", n.Data)
		if err != nil {
			return "", err
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.HandshakeContext(ctx); err != nil {
			return "", err
		}
		return tc.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
	}
	both := x509.NewCertPool()
	both.AddCert(oldCA.cert)
	both.AddCert(newCA.cert)
	clientCert := func(ca *pki) tls.Certificate {
		cert, key := ca.issue(t, "adserver")
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	oldClient := &tls.Config{RootCAs: both, Certificates: []tls.Certificate{clientCert(oldCA)}}
	newClient := &tls.Config{RootCAs: both, Certificates: []tls.Certificate{clientCert(newCA)}}

	for _, n := range nodes {
		if got, err := issuer(n, oldClient); err != nil || got != "old" {
			t.Fatalf("%s before the reload: issuer %q, %v; want old", n.Name, got, err)
		}
	}

	// A reload of files that do not parse keeps what was loaded.
	writeFile(t, certFile, "not a certificate")
	nodes[0].Reload()
	cluster.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(nodes[0].Logs(), "TLS material kept as it was")
	}, "%s never logged the failed reload", nodes[0].Name)
	if got, err := issuer(nodes[0], oldClient); err != nil || got != "old" {
		t.Fatalf("after a failed reload: issuer %q, %v; want the old certificate still served", got, err)
	}

	install(newCA, oldCA, newCA)
	for _, n := range nodes {
		n.Reload()
	}
	for _, n := range nodes {
		cluster.Eventually(t, 30*time.Second, func() bool {
			got, err := issuer(n, newClient)
			return err == nil && got == "new"
		}, "%s never served the new certificate to a client of the new CA", n.Name)
	}

	// Peers verify each other against the reloaded bundles: restart one
	// node (it starts with the new files) so the connections between the
	// two are new, and strict writes, acknowledged only once the backup
	// has them, go through. Without the reload, the other node would
	// refuse the restarted one's new certificate both ways.
	nodes[1].Restart()
	cluster.Eventually(t, 60*time.Second, nodes[1].Ready, "%s not ready after its restart:\n%s", nodes[1].Name, logTail{nodes[1]})
	c := cluster.NewClient(t, cluster.Seeds(nodes[0], nodes[1]), func(c *client.Config) { c.TLS = newClient })
	strictCap := fcap.Cap{Scope: "campaign", ID: "reload", Limit: 1, Window: fcap.MaxWindow, Mode: fcap.Strict}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The restarted node is back once a strict write is answered (the
	// partitions it owns arrive from the other node over TLS first).
	probe := 0
	cluster.Eventually(t, 60*time.Second, func() bool {
		probe++
		v, err := c.Allow(ctx, fmt.Sprintf("viewer-probe-%d", probe), []fcap.Cap{strictCap})
		return err == nil && !v.Failed()
	}, "strict writes never answered after the restart:\n%s:\n%s", nodes[0].Name, logTail{nodes[0]})
	for i, want := range []bool{true, false} {
		v, err := c.Allow(ctx, "viewer-reload", []fcap.Cap{strictCap})
		if err != nil || v.Allowed != want || v.Failed() {
			t.Fatalf("strict allow %d after the reload: %+v, %v; want allowed %v, answered", i, v, err, want)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}

// logTail prints the end of a node's log when it is formatted.
type logTail struct{ n *cluster.Node }

func (l logTail) String() string {
	s := l.n.Logs()
	return s[max(0, len(s)-4000):]
}
