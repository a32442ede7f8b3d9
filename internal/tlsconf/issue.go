package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"time"
)

// KeyPair is a certificate and its private key, with their PEM
// encodings. A CA's KeyPair issues the others.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte // PKCS #8, "PRIVATE KEY"
}

// NewCA creates a self-signed CA (ECDSA P-256) named commonName, valid
// from notBefore for validFor. It may sign certificates only, not CAs
// below it (path length 0).
func NewCA(commonName string, notBefore time.Time, validFor time.Duration) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"logd"}},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return issue(tmpl, nil, notBefore, validFor)
}

// IssueNode issues the certificate of node id: URI SAN logd://node/<id>,
// the DNS names and IP addresses of hosts as SANs, usable by servers and
// clients (a node is both to its peers).
func (ca *KeyPair) IssueNode(id string, hosts []string, notBefore time.Time, validFor time.Duration) (*KeyPair, error) {
	if err := ValidName(id); err != nil {
		return nil, fmt.Errorf("node id: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: id, Organization: []string{"logd"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{nodeURI(id)},
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.sign(tmpl, notBefore, validFor)
}

// IssueClient issues the certificate of user name: common name and URI
// SAN logd://user/<name>, usable by clients only.
func (ca *KeyPair) IssueClient(name string, notBefore time.Time, validFor time.Duration) (*KeyPair, error) {
	if err := ValidName(name); err != nil {
		return nil, fmt.Errorf("user name: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{userURI(name)},
	}
	return ca.sign(tmpl, notBefore, validFor)
}

func (ca *KeyPair) sign(tmpl *x509.Certificate, notBefore time.Time, validFor time.Duration) (*KeyPair, error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil || !ca.Cert.IsCA {
		return nil, errors.New("tlsconf: issuer is not a CA key pair")
	}
	return issue(tmpl, ca, notBefore, validFor)
}

// issue signs tmpl with a fresh P-256 key, by parent (nil: self-signed).
func issue(tmpl *x509.Certificate, parent *KeyPair, notBefore time.Time, validFor time.Duration) (*KeyPair, error) {
	if validFor <= 0 {
		return nil, fmt.Errorf("tlsconf: validity %v: want a positive duration", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: generate key: %w", err)
	}
	// RFC 5280 serials: positive, at most 20 octets; 128 random bits.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("tlsconf: serial: %w", err)
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	tmpl.NotBefore = notBefore
	tmpl.NotAfter = notBefore.Add(validFor)
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: sign %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: parse issued certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: encode key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ParseKeyPair decodes a PEM certificate and its PEM private key (PKCS #8,
// PKCS #1 or SEC 1), checking that they belong together. The CA files
// logd cert writes read back with it.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	pair, err := x509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("tlsconf: private key of type %T cannot sign", pair.PrivateKey)
	}
	return &KeyPair{Cert: pair.Leaf, Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}
