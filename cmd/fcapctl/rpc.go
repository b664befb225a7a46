package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fcap-io/fcap/proto/rpc"
)

// connFlags are the flags of every command that talks to a cluster: how
// to reach its data plane when it is secured.
type connFlags struct {
	ca, cert, key string
	tokenFile     string
}

// nodeFlags are the flags of a command that asks the nodes themselves
// (status, ring, keys, gossip-key): any node's data-plane address, the
// deadline of the whole command, JSON output and how to connect.
type nodeFlags struct {
	addr    string
	timeout time.Duration
	asJSON  bool
	conn    *connFlags
}

// register adds the flags to fs, --timeout defaulting to timeout.
func (n *nodeFlags) register(fs *flag.FlagSet, timeout time.Duration) {
	fs.StringVar(&n.addr, "addr", "127.0.0.1:7700", "data-plane address of any node (comma-separated for several)")
	fs.DurationVar(&n.timeout, "timeout", timeout, "deadline of the whole command")
	fs.BoolVar(&n.asJSON, "json", false, "print JSON")
	n.conn = addConnFlags(fs)
}

func addConnFlags(fs *flag.FlagSet) *connFlags {
	c := &connFlags{}
	fs.StringVar(&c.ca, "tls-ca", os.Getenv("FCAPCTL_TLS_CA"), "PEM CA certificates that verify the nodes: connect over TLS (env FCAPCTL_TLS_CA)")
	fs.StringVar(&c.cert, "tls-cert", os.Getenv("FCAPCTL_TLS_CERT"), "PEM client certificate, for nodes that require one (env FCAPCTL_TLS_CERT)")
	fs.StringVar(&c.key, "tls-key", os.Getenv("FCAPCTL_TLS_KEY"), "PEM private key of --tls-cert (env FCAPCTL_TLS_KEY)")
	fs.StringVar(&c.tokenFile, "token-file", os.Getenv("FCAPCTL_TOKEN_FILE"), "file holding the token to present, for nodes started with --tokens-file (an operator token for status, drain, gossip-key) (env FCAPCTL_TOKEN_FILE)")
	return c
}

// token reads the token of --token-file, "" when it is not set.
func (c *connFlags) token() (string, error) {
	if c.tokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", c.tokenFile)
	}
	return tok, nil
}

// tls returns the client TLS config the flags ask for, nil for
// plaintext.
func (c *connFlags) tls() (*tls.Config, error) {
	if c.ca == "" && c.cert == "" && c.key == "" {
		return nil, nil
	}
	return rpc.LoadTLS(c.ca, c.cert, c.key)
}

// admin returns what sends one-off requests as the flags say.
func (c *connFlags) admin() (*rpc.Admin, error) {
	t, err := c.tls()
	if err != nil {
		return nil, err
	}
	tok, err := c.token()
	if err != nil {
		return nil, err
	}
	return &rpc.Admin{TLS: t, Token: tok}, nil
}
