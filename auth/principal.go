package auth

import (
	"errors"
	"fmt"
	"strings"
)

// Principal types.
const (
	// TypeUser is a client: a certificate's user name or a token's principal.
	TypeUser = "User"
	// TypeNode is a cluster node, identified by its node certificate.
	TypeNode = "Node"
)

// Principal is who makes a call, in Kafka's form: a type and a name
// ("User:alice").
type Principal struct {
	Type string
	Name string
}

// Anonymous is the principal of a call nobody authenticated.
var Anonymous = Principal{Type: TypeUser, Name: "ANONYMOUS"}

// User returns the user principal name.
func User(name string) Principal { return Principal{Type: TypeUser, Name: name} }

// String returns "Type:Name", Kafka's notation.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// ErrInvalidPrincipal is wrapped by ParsePrincipal's errors.
var ErrInvalidPrincipal = errors.New("auth: invalid principal")

// MaxNameLen bounds principal names, resource names and token descriptions.
const MaxNameLen = 255

// ParsePrincipal parses "User:alice" or "Node:n1"; a bare name ("alice") is
// a user. Names are 1 to MaxNameLen printable characters without spaces,
// commas or colons beyond the type separator.
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok {
		typ, name = TypeUser, s
	}
	switch typ {
	case TypeUser, TypeNode:
	default:
		return Principal{}, fmt.Errorf("%w %q: type must be User or Node", ErrInvalidPrincipal, s)
	}
	if err := checkName(name); err != nil {
		return Principal{}, fmt.Errorf("%w %q: %v", ErrInvalidPrincipal, s, err)
	}
	return Principal{Type: typ, Name: name}, nil
}

// ValidName checks a principal or resource name: 1 to MaxNameLen
// printable ASCII characters other than space, comma, colon and quote.
func ValidName(name string) error { return checkName(name) }

func checkName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("name longer than %d bytes", MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || c == ',' || c == ':' || c == '"' {
			return fmt.Errorf("character %q not allowed", c)
		}
	}
	return nil
}
