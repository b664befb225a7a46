package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fcap-io/fcap/proto/rpc"
)

// tlsFiles is the data plane's certificate material, read from the
// --tls-* files at start and again on every reload (SIGHUP), so a renewed
// certificate, key or CA bundle takes effect without a restart: new
// handshakes use it, connections already up keep theirs. A reload that
// fails keeps what was loaded before, whole.
type tlsFiles struct {
	cert, key, clientCA, ca string
	now                     atomic.Pointer[tlsMaterial]
}

// tlsMaterial is one consistent load of the files.
type tlsMaterial struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool // nil without --tls-client-ca
	rootCAs   *x509.CertPool // nil without --tls-ca: the system's roots
}

// load reads every file and, only if all of them are good, puts the new
// material in place.
func (f *tlsFiles) load() error {
	cert, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	m := &tlsMaterial{cert: &cert}
	if f.clientCA != "" {
		if m.clientCAs, err = rpc.LoadCertPool(f.clientCA); err != nil {
			return fmt.Errorf("--tls-client-ca: %w", err)
		}
	}
	if f.ca != "" {
		if m.rootCAs, err = rpc.LoadCertPool(f.ca); err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
	}
	f.now.Store(m)
	return nil
}

// server returns the config the data plane serves with: each handshake
// takes the material loaded last.
func (f *tlsFiles) server() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := f.now.Load()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.cert}}
			if m.clientCAs != nil {
				c.ClientCAs, c.ClientAuth = m.clientCAs, tls.RequireAndVerifyClientCert
			}
			return c, nil
		},
	}
}

// peer returns the config this node dials its peers with: it presents
// the certificate loaded last and verifies the peer's against the CA
// bundle loaded last. crypto/tls reads RootCAs once per config, so the
// chain is verified here (VerifyConnection, with the same checks as
// crypto/tls: chain to a root, the dialled name, server auth usage)
// rather than by crypto/tls, which is told to skip its own.
func (f *tlsFiles) peer() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return f.now.Load().cert, nil
		},
		InsecureSkipVerify: true, // verified by VerifyConnection below, never skipped
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs, f.now.Load().rootCAs)
		},
	}
}

// verifyPeer verifies a peer's certificate chain against roots (nil: the
// system's) and the name it was dialled by.
func verifyPeer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the peer presented no certificate")
	}
	opts := x509.VerifyOptions{
		Roots:         roots,
		DNSName:       cs.ServerName,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: peer certificate: %w", err)
	}
	return nil
}
