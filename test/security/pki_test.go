package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// pki is a throwaway certificate authority whose files live in the
// test's temporary folder.
type pki struct {
	dir  string
	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	CA   string // the CA certificate's PEM file
}

var serial = big.NewInt(1)

func nextSerial() *big.Int {
	serial = new(big.Int).Add(serial, big.NewInt(1))
	return serial
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	key := newECKey(t)
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der := sign(t, tmpl, tmpl, key, key)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{dir: t.TempDir(), name: name, cert: cert, key: key}
	p.CA = filepath.Join(p.dir, name+"-ca.pem")
	writePEM(t, p.CA, "CERTIFICATE", der)
	return p
}

// issue signs a certificate for name, valid for 127.0.0.1 and localhost,
// usable as server and client certificate (a node is both), and returns
// its certificate and key files.
func (p *pki) issue(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key := newECKey(t)
	tmpl := template(name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	tmpl.DNSNames = []string{"localhost"}
	der := sign(t, tmpl, p.cert, key, p.key)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(p.dir, name+".pem")
	keyFile = filepath.Join(p.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kb)
	return certFile, keyFile
}

// template is a certificate for name, valid from an hour ago for a day,
// with a serial number of its own.
func template(name string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// sign makes tmpl a certificate of key's public half, signed by parent's
// key, and returns its DER bytes.
func sign(t *testing.T, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	writeFile(t, path, string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})))
}
