package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Dial connects to a node: over TLS when cfg is not nil, then presents
// token when it is not empty, each within timeout. Nagle is off:
// requests are small and batched by the caller already. rawDial, when
// not nil, opens the TCP connection instead of a net.Dialer (a proxy, in
// tests; see client.Config.Dial), and TLS runs over it.
func Dial(ctx context.Context, addr string, timeout time.Duration, cfg *tls.Config, token string, rawDial func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	var nc net.Conn
	var err error
	switch {
	case rawDial != nil:
		// rawDial opens the TCP connection (a proxy, in tests); TLS,
		// when configured, runs over it.
		dctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if nc, err = rawDial(dctx, "tcp", addr); err != nil {
			return nil, err
		}
		if cfg != nil {
			c := cfg.Clone()
			if c.ServerName == "" {
				if host, _, herr := net.SplitHostPort(addr); herr == nil {
					c.ServerName = host
				}
			}
			tc := tls.Client(nc, c)
			if err = tc.HandshakeContext(dctx); err != nil {
				nc.Close()
				return nil, err
			}
			nc = tc
		}
	case cfg == nil:
		nc, err = d.DialContext(ctx, "tcp", addr)
	default:
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		td := tls.Dialer{NetDialer: d, Config: cfg}
		nc, err = td.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if token != "" {
		nc.SetDeadline(time.Now().Add(timeout))
		if _, err := proto.SayHello(nc, token); err != nil {
			nc.Close()
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		nc.SetDeadline(time.Time{})
	}
	return nc, nil
}

// LoadTLS builds a client TLS config from PEM files: caFile holds the CA
// certificates that verify the nodes (empty: the system's roots);
// certFile and keyFile, both or neither, the client certificate for
// nodes that require one. TLS 1.2 at least.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadCertPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("tls: a client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// LoadCertPool reads PEM certificates from file into a new pool.
func LoadCertPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: no PEM certificate in %s", file)
	}
	return pool, nil
}
