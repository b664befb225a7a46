package security

import (
	"crypto/tls"
	"errors"
)

// Config is what a node trusts on its data plane.
type Config struct {
	// TLS, if not nil, serves the data plane over TLS only, with this
	// config: its certificate, and ClientAuth and ClientCAs to require
	// and verify client certificates. A client that does not speak TLS
	// gets one plaintext Error frame (CodeUnsupported) and is closed.
	// Default nil: plaintext.
	TLS *tls.Config

	// PeerTLS, if not nil, dials other nodes' data planes (replication,
	// partition requests) over TLS with this config: RootCAs verify the
	// peers, Certificates are the client certificate they may require.
	// Required when TLS is set: every node of a cluster serves TLS or
	// none does. Default nil: plaintext.
	PeerTLS *tls.Config

	// Tokens, when not empty, makes every data-plane connection
	// authenticate: its first frame is a Hello with one of these tokens,
	// and the token's role decides what it may ask (see Role). A request
	// before a valid Hello gets ErrUnauthenticated, one outside the role
	// ErrPermissionDenied; either changes nothing. ParseTokens reads a
	// tokens file. Default nil: no authentication.
	Tokens map[string]Role

	// PeerToken is the token this node presents to other nodes (Hello on
	// its replication and partition-request connections): a peer (or
	// operator) token of Tokens, which every node of the cluster shares.
	// Required when Tokens is set. Default empty.
	PeerToken string
}

// Validate checks the fields against each other.
func (c *Config) Validate() error {
	var errs []error
	if c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil && c.TLS.GetConfigForClient == nil {
		errs = append(errs, errors.New("security config: TLS has no certificate"))
	}
	if c.TLS != nil && c.PeerTLS == nil {
		errs = append(errs, errors.New("security config: TLS is set but PeerTLS is not: peers serve TLS too, so dialing them needs it"))
	}
	if len(c.Tokens) > 0 {
		if r := c.Tokens[c.PeerToken]; r != RolePeer && r != RoleOperator {
			errs = append(errs, errors.New("security config: Tokens is set but PeerToken is not one of its peer tokens: nodes could not replicate"))
		}
	}
	return errors.Join(errs...)
}

// PeerHello is the token this node presents to its peers: PeerToken when
// the nodes use tokens, else none.
func (c *Config) PeerHello() string {
	if len(c.Tokens) == 0 {
		return ""
	}
	return c.PeerToken
}
