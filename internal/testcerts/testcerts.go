// Package testcerts issues throwaway certificates for tests of peer and
// client TLS: a CA, node certificates that carry logd://node/<id> as a URI
// SAN and 127.0.0.1 as an IP SAN, and client certificates that are not
// node certificates (docs/security.md). It is test support: keys are
// ECDSA P-256, generated per call, and nothing is written to disk.
//
// The package imports the standard library only.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"
)

// CA is a certificate authority that signs node and client certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// Pool holds Cert alone: the roots and client CAs of a configuration
	// that trusts this CA.
	Pool *x509.CertPool
}

// NewCA returns a new self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create CA %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA %s: %v", name, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}
}

// NodeURI is the URI SAN of node id's certificate.
func NodeURI(id string) *url.URL {
	return &url.URL{Scheme: "logd", Host: "node", Path: "/" + id}
}

// Node issues the certificate of node id: a URI SAN logd://node/<id>,
// IP SANs 127.0.0.1 and ::1 and the DNS SAN localhost, usable by servers
// and clients.
func (ca *CA) Node(t testing.TB, id string) tls.Certificate {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: id},
		URIs:        []*url.URL{NodeURI(id)},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// Client issues a client certificate for user name: a URI SAN
// logd://user/<name> and the common name name, usable by clients only;
// it is not a node certificate.
func (ca *CA) Client(t testing.TB, name string) tls.Certificate {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		URIs:        []*url.URL{{Scheme: "logd", Host: "user", Path: "/" + name}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Service issues a certificate that is not a node certificate but is
// usable by servers and clients at a node's addresses (127.0.0.1, ::1,
// localhost), with the user URI SAN logd://user/<name>: what a CA that
// also signs other services' certificates issues, which must not pass
// for a node.
func (ca *CA) Service(t testing.TB, name string) tls.Certificate {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		URIs:        []*url.URL{{Scheme: "logd", Host: "user", Path: "/" + name}},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatalf("issue %s: %v", tmpl.Subject.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse %s: %v", tmpl.Subject.CommonName, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// ServerConfig is a server's configuration presenting cert and requiring
// a client certificate of this CA (mutual TLS).
func (ca *CA) ServerConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}

// OptionalClientConfig is a server's configuration presenting cert and
// verifying a client certificate of this CA when one is given, as an API
// port that also serves clients without certificates.
func (ca *CA) OptionalClientConfig(cert tls.Certificate) *tls.Config {
	c := ca.ServerConfig(cert)
	c.ClientAuth = tls.VerifyClientCertIfGiven
	return c
}

// ClientConfig is a client's configuration presenting cert (none when
// cert is the zero value) and trusting this CA's servers.
func (ca *CA) ClientConfig(cert tls.Certificate) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
	if len(cert.Certificate) > 0 {
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("serial: %v", err)
	}
	return n
}
