package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// x509KeyPair decodes a certificate chain (leaf first) and its private
// key. Unlike tls.X509KeyPair it tells a mismatched key (ErrKeyMismatch)
// from undecodable input.
func x509KeyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	var out tls.Certificate
	certs, err := parseCertificates(certPEM)
	if err != nil {
		return out, err
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return out, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(certs[0].PublicKey) {
		return out, ErrKeyMismatch
	}
	for _, c := range certs {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	out.PrivateKey = key
	out.Leaf = certs[0]
	return out, nil
}

// parseCertificates decodes every CERTIFICATE block of data. Other
// blocks are refused: a key pasted into a certificate file is a mistake
// worth stopping at.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("tlsconf: PEM block %q where a CERTIFICATE was expected", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: parse certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, ErrNoCertificate
	}
	return out, nil
}

// parsePrivateKey decodes the first private key block of data: PKCS #8,
// PKCS #1 (RSA) or SEC 1 (EC).
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("tlsconf: no PEM private key in file")
		}
		var key any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			continue // EC PARAMETERS and the like precede the key
		}
		if err != nil {
			return nil, fmt.Errorf("tlsconf: parse private key: %w", err)
		}
		switch k := key.(type) {
		case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
			return k.(crypto.Signer), nil
		}
		return nil, fmt.Errorf("tlsconf: private key of type %T not supported", key)
	}
}

// checkValidity refuses a certificate outside its validity period at now.
func checkValidity(c *x509.Certificate, now time.Time) error {
	switch {
	case now.After(c.NotAfter):
		return fmt.Errorf("%w: %q expired at %s", ErrExpired, c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Errorf("%w: %q valid from %s", ErrNotYetValid, c.Subject.CommonName, c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}
