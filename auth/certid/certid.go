// Package certid maps certificates to principals: a node certificate
// carries the URI SAN logd://node/<id>; a client certificate
// logd://user/<name>, else its subject CN names the user
// (docs/security.md, "Principals"). It is apart from package auth, which
// stays pure, because crypto/x509 brings the network and randomness in.
package certid

import (
	"crypto/x509"
	"strings"

	"github.com/logd-dev/logd/auth"
)

// The URI SAN prefixes of node and user certificates.
const (
	NodeURIPrefix = "logd://node/"
	UserURIPrefix = "logd://user/"
)

// NodeID returns the node id of a node certificate.
func NodeID(cert *x509.Certificate) (string, bool) {
	if cert == nil {
		return "", false
	}
	for _, u := range cert.URIs {
		if id, ok := strings.CutPrefix(u.String(), NodeURIPrefix); ok && auth.ValidName(id) == nil {
			return id, true
		}
	}
	return "", false
}

// Principal returns the principal a verified certificate names:
// Node:<id> for a node certificate, User:<name> from the user URI SAN or
// the subject CN, or false when it names none.
func Principal(cert *x509.Certificate) (auth.Principal, bool) {
	if id, ok := NodeID(cert); ok {
		return auth.Principal{Type: auth.TypeNode, Name: id}, true
	}
	if cert == nil {
		return auth.Principal{}, false
	}
	for _, u := range cert.URIs {
		if name, ok := strings.CutPrefix(u.String(), UserURIPrefix); ok && auth.ValidName(name) == nil {
			return auth.User(name), true
		}
	}
	if cn := cert.Subject.CommonName; auth.ValidName(cn) == nil {
		return auth.User(cn), true
	}
	return auth.Principal{}, false
}
