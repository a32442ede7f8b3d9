package tlsconf

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/logd-dev/logd/auth/certid"
)

// maxNameLen bounds a node id or user name in a certificate
// (replication's bound on node ids).
const maxNameLen = 128

// ValidName reports whether s can be the node id or user name of a
// certificate logd issues: 1 to 128 letters, digits and .-_@, not
// starting with a dot. It names the certificate's files as well, and is
// within what both a node id and a principal name (package auth) allow.
func ValidName(s string) error {
	if s == "" || len(s) > maxNameLen {
		return fmt.Errorf("%w %q: want 1 to %d characters", ErrInvalidName, s, maxNameLen)
	}
	if s[0] == '.' {
		return fmt.Errorf("%w %q: starts with a dot", ErrInvalidName, s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_@", c)) {
			return fmt.Errorf("%w %q: character %q: want letters, digits and .-_@", ErrInvalidName, s, c)
		}
	}
	return nil
}

// nodeURI and userURI are the URI SANs of node and user certificates
// (package auth/certid reads them).
func nodeURI(id string) *url.URL   { return mustURI(certid.NodeURIPrefix + id) }
func userURI(name string) *url.URL { return mustURI(certid.UserURIPrefix + name) }

// mustURI parses a URI made of a prefix and a ValidName, which always
// parses.
func mustURI(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(fmt.Sprintf("tlsconf: URI %q: %v", s, err))
	}
	return u
}
