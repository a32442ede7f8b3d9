package tlsconf

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// URI SAN conventions of logd certificates (docs/security.md).
const (
	// URIScheme is the scheme of logd's identity URIs.
	URIScheme = "logd"
	// nodeHost and userHost are the URI hosts of node and user
	// identities: logd://node/<id>, logd://user/<name>.
	nodeHost = "node"
	userHost = "user"
	// NodePrincipalPrefix prefixes a node's id in its principal name.
	NodePrincipalPrefix = "Node:"
	// maxNameLen bounds a node id or user name (replication's bound on
	// node ids).
	maxNameLen = 128
)

// ValidName reports whether s can be a node id or user name in a
// certificate: 1 to 128 letters, digits and .-_:@, not starting with a
// dot (it also names the certificate's files).
func ValidName(s string) error {
	if s == "" || len(s) > maxNameLen {
		return fmt.Errorf("%w %q: want 1 to %d characters", ErrInvalidName, s, maxNameLen)
	}
	if s[0] == '.' {
		return fmt.Errorf("%w %q: starts with a dot", ErrInvalidName, s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_:@", c)) {
			return fmt.Errorf("%w %q: character %q: want letters, digits and .-_:@", ErrInvalidName, s, c)
		}
	}
	return nil
}

// NodeURI is the URI SAN of node id's certificate.
func NodeURI(id string) *url.URL {
	return &url.URL{Scheme: URIScheme, Host: nodeHost, Path: "/" + id}
}

// UserURI is the URI SAN of user name's certificate.
func UserURI(name string) *url.URL {
	return &url.URL{Scheme: URIScheme, Host: userHost, Path: "/" + name}
}

// NodeID is the node id of a node certificate: its one URI SAN
// logd://node/<id>. ok is false when cert has no such URI, more than one,
// or one whose id is not a valid name. It does not verify cert: callers
// take it from a verified chain (Reloader.VerifyNode does both).
func NodeID(cert *x509.Certificate) (id string, ok bool) {
	return identity(cert, nodeHost)
}

// UserName is the user a client certificate names: its one URI SAN
// logd://user/<name>, else its subject's common name. It is "" when the
// certificate has more than one user URI or an invalid one (no fallback
// to the common name then: the URI was meant to name the user).
func UserName(cert *x509.Certificate) string {
	if cert == nil {
		return ""
	}
	if n := count(cert, userHost); n > 0 {
		name, _ := identity(cert, userHost)
		return name
	}
	return cert.Subject.CommonName
}

// Principal is the principal a certificate authenticates: Node:<id> for a
// node certificate, else UserName (which may be "").
func Principal(cert *x509.Certificate) string {
	if id, ok := NodeID(cert); ok {
		return NodePrincipalPrefix + id
	}
	return UserName(cert)
}

// identity returns the name of cert's one logd://<host>/<name> URI.
func identity(cert *x509.Certificate, host string) (string, bool) {
	if cert == nil || count(cert, host) != 1 {
		return "", false
	}
	for _, u := range cert.URIs {
		if !isLogd(u, host) {
			continue
		}
		name, ok := strings.CutPrefix(u.Path, "/")
		if !ok || u.RawQuery != "" || u.Fragment != "" || u.User != nil || ValidName(name) != nil {
			return "", false
		}
		return name, true
	}
	return "", false
}

func count(cert *x509.Certificate, host string) int {
	n := 0
	for _, u := range cert.URIs {
		if isLogd(u, host) {
			n++
		}
	}
	return n
}

func isLogd(u *url.URL, host string) bool {
	return u != nil && strings.EqualFold(u.Scheme, URIScheme) && strings.EqualFold(u.Host, host)
}
