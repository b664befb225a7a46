package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/fcap-io/fcap/client"
)

// connFlags are the flags of every command that talks to a cluster: how
// to reach its data plane when it is secured.
type connFlags struct {
	ca, cert, key string
	tokenFile     string
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
	return client.LoadTLS(c.ca, c.cert, c.key)
}

// admin returns what sends one-off requests as the flags say.
func (c *connFlags) admin() (*client.Admin, error) {
	t, err := c.tls()
	if err != nil {
		return nil, err
	}
	tok, err := c.token()
	if err != nil {
		return nil, err
	}
	return &client.Admin{TLS: t, Token: tok}, nil
}
