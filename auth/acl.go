package auth

import (
	"errors"
	"fmt"
	"strings"
)

// Operation is what a call does to a resource.
type Operation uint8

// The operations. Values are persisted in Raft logs and snapshots (as
// names, see MarshalText): never rename them.
const (
	OpRead Operation = iota + 1
	OpWrite
	OpCreate
	OpDelete
	OpAlter
	OpDescribe
	// OpAdmin is cluster administration: membership, leadership, and the
	// tokens and ACLs of others.
	OpAdmin
	// OpAll in an ACL matches every operation.
	OpAll
)

// ResourceType is the kind of thing an operation is on.
type ResourceType uint8

// The resource types.
const (
	ResourceTopic ResourceType = iota + 1
	ResourceGroup
	ResourceQueue
	ResourceCluster
	ResourceToken
	ResourceACL
)

// ClusterName is the name of the one cluster resource.
const ClusterName = "logd"

// PatternType says how an ACL's name matches a resource name.
type PatternType uint8

// The pattern types.
const (
	// PatternLiteral matches the name exactly; the literal name "*" matches
	// every name.
	PatternLiteral PatternType = iota + 1
	// PatternPrefix matches every name that starts with the ACL's name.
	PatternPrefix
)

// Effect is whether an ACL allows or denies.
type Effect uint8

// The effects. Deny wins over allow.
const (
	Allow Effect = iota + 1
	Deny
)

var (
	opNames      = [...]string{"", "read", "write", "create", "delete", "alter", "describe", "admin", "all"}
	resNames     = [...]string{"", "topic", "group", "queue", "cluster", "token", "acl"}
	patternNames = [...]string{"", "literal", "prefix"}
	effectNames  = [...]string{"", "allow", "deny"}
)

// ErrInvalidACL is wrapped by the errors of parsing and validating ACLs.
var ErrInvalidACL = errors.New("auth: invalid ACL")

func (o Operation) String() string    { return enumName(opNames[:], int(o)) }
func (r ResourceType) String() string { return enumName(resNames[:], int(r)) }
func (p PatternType) String() string  { return enumName(patternNames[:], int(p)) }
func (e Effect) String() string       { return enumName(effectNames[:], int(e)) }

func enumName(names []string, i int) string {
	if i <= 0 || i >= len(names) {
		return fmt.Sprintf("invalid(%d)", i)
	}
	return names[i]
}

func parseEnum(names []string, what, s string) (int, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	for i := 1; i < len(names); i++ {
		if names[i] == l {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: %s %q: want one of %s", ErrInvalidACL, what, s, strings.Join(names[1:], ", "))
}

// ParseOperation parses an operation name ("read", ...; case-insensitive).
func ParseOperation(s string) (Operation, error) {
	i, err := parseEnum(opNames[:], "operation", s)
	return Operation(i), err
}

// ParseResourceType parses a resource type name ("topic", ...).
func ParseResourceType(s string) (ResourceType, error) {
	i, err := parseEnum(resNames[:], "resource type", s)
	return ResourceType(i), err
}

// ParsePatternType parses "literal" or "prefix".
func ParsePatternType(s string) (PatternType, error) {
	i, err := parseEnum(patternNames[:], "pattern type", s)
	return PatternType(i), err
}

// ParseEffect parses "allow" or "deny".
func ParseEffect(s string) (Effect, error) {
	i, err := parseEnum(effectNames[:], "effect", s)
	return Effect(i), err
}

// MarshalText encodes the operation by name.
func (o Operation) MarshalText() ([]byte, error) { return marshalEnum(o.String(), o.valid()) }

// UnmarshalText decodes an operation name.
func (o *Operation) UnmarshalText(b []byte) error {
	v, err := ParseOperation(string(b))
	*o = v
	return err
}

// MarshalText encodes the resource type by name.
func (r ResourceType) MarshalText() ([]byte, error) { return marshalEnum(r.String(), r.valid()) }

// UnmarshalText decodes a resource type name.
func (r *ResourceType) UnmarshalText(b []byte) error {
	v, err := ParseResourceType(string(b))
	*r = v
	return err
}

// MarshalText encodes the pattern type by name.
func (p PatternType) MarshalText() ([]byte, error) { return marshalEnum(p.String(), p.valid()) }

// UnmarshalText decodes a pattern type name.
func (p *PatternType) UnmarshalText(b []byte) error {
	v, err := ParsePatternType(string(b))
	*p = v
	return err
}

// MarshalText encodes the effect by name.
func (e Effect) MarshalText() ([]byte, error) { return marshalEnum(e.String(), e.valid()) }

// UnmarshalText decodes an effect name.
func (e *Effect) UnmarshalText(b []byte) error {
	v, err := ParseEffect(string(b))
	*e = v
	return err
}

func marshalEnum(name string, ok bool) ([]byte, error) {
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrInvalidACL, name)
	}
	return []byte(name), nil
}

func (o Operation) valid() bool    { return o >= OpRead && o <= OpAll }
func (r ResourceType) valid() bool { return r >= ResourceTopic && r <= ResourceACL }
func (p PatternType) valid() bool  { return p == PatternLiteral || p == PatternPrefix }
func (e Effect) valid() bool       { return e == Allow || e == Deny }

// ACL is one rule: Principal (a principal's "Type:Name", or "*" for every
// principal, the anonymous one included) may, or may not, do Operation on
// the resources of type Resource whose name matches Name under Pattern.
// The JSON form, with every enum by name, is the replicated encoding.
type ACL struct {
	Principal string       `json:"principal"`
	Resource  ResourceType `json:"resource"`
	Pattern   PatternType  `json:"pattern"`
	Name      string       `json:"name"`
	Operation Operation    `json:"operation"`
	Effect    Effect       `json:"effect"`
}

// AnyPrincipal in an ACL's Principal matches every principal.
const AnyPrincipal = "*"

// Validate checks every field. A prefix pattern's name may not be "*"
// (write a literal "*" for "every name"), and the cluster resource's name
// is ClusterName.
func (a ACL) Validate() error {
	if a.Principal != AnyPrincipal {
		p, err := ParsePrincipal(a.Principal)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidACL, err)
		}
		if p.String() != a.Principal {
			return fmt.Errorf("%w: principal %q: write it as %q", ErrInvalidACL, a.Principal, p.String())
		}
	}
	switch {
	case !a.Resource.valid():
		return fmt.Errorf("%w: resource type %s", ErrInvalidACL, a.Resource)
	case !a.Pattern.valid():
		return fmt.Errorf("%w: pattern type %s", ErrInvalidACL, a.Pattern)
	case !a.Operation.valid():
		return fmt.Errorf("%w: operation %s", ErrInvalidACL, a.Operation)
	case !a.Effect.valid():
		return fmt.Errorf("%w: effect %s", ErrInvalidACL, a.Effect)
	case a.Pattern == PatternPrefix && a.Name == "*":
		return fmt.Errorf("%w: prefix %q: for every name use the literal name \"*\"", ErrInvalidACL, a.Name)
	case a.Resource == ResourceCluster && a.Name != ClusterName && a.Name != "*":
		return fmt.Errorf("%w: the cluster resource is named %q", ErrInvalidACL, ClusterName)
	}
	if a.Name != "*" {
		if err := checkName(a.Name); err != nil {
			return fmt.Errorf("%w: name %q: %v", ErrInvalidACL, a.Name, err)
		}
	}
	return nil
}

// String renders the ACL the way logctl shows it.
func (a ACL) String() string {
	return fmt.Sprintf("%s %s %s on %s %s %q", a.Effect, a.Principal, a.Operation, a.Resource, a.Pattern, a.Name)
}

// Permission is what one call needs: an operation on one named resource.
type Permission struct {
	Op       Operation
	Resource ResourceType
	Name     string
}

// String renders the permission as errors show it: "write topic orders".
func (p Permission) String() string {
	return p.Op.String() + " " + p.Resource.String() + " " + p.Name
}

// matchesName reports whether the ACL's pattern covers name.
func (a *ACL) matchesName(name string) bool {
	if a.Pattern == PatternPrefix {
		return strings.HasPrefix(name, a.Name)
	}
	return a.Name == "*" || a.Name == name
}

// matchesPrincipal reports whether the ACL applies to principal p, whose
// "Type:Name" form is ps.
func (a *ACL) matchesPrincipal(p Principal) bool {
	if a.Principal == AnyPrincipal {
		return true
	}
	// Compare "Type:Name" without building it.
	s := a.Principal
	return len(s) == len(p.Type)+1+len(p.Name) && s[:len(p.Type)] == p.Type &&
		s[len(p.Type)] == ':' && s[len(p.Type)+1:] == p.Name
}

// grants reports whether an allowing ACL with operation acl covers op.
// As in Kafka, all covers everything, and read, write, delete and alter
// imply describe.
func grants(acl, op Operation) bool {
	if acl == op || acl == OpAll {
		return true
	}
	if op == OpDescribe {
		switch acl {
		case OpRead, OpWrite, OpDelete, OpAlter:
			return true
		}
	}
	return false
}

// denies reports whether a denying ACL with operation acl covers op: only
// the same operation or all (denying read does not deny describe).
func denies(acl, op Operation) bool { return acl == op || acl == OpAll }

// Set is an immutable set of ACLs, indexed by resource type. The zero Set
// and nil allow nothing.
type Set struct {
	all    []ACL
	byType [ResourceACL + 1][]ACL
}

// NewSet returns the set of acls (copied; duplicates removed, order kept).
// Invalid ACLs are an error: a Set only holds what Validate accepts.
func NewSet(acls []ACL) (*Set, error) {
	s := &Set{}
	seen := make(map[ACL]bool, len(acls))
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return nil, err
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		s.all = append(s.all, a)
		s.byType[a.Resource] = append(s.byType[a.Resource], a)
	}
	return s, nil
}

// ACLs returns a copy of the set's ACLs.
func (s *Set) ACLs() []ACL {
	if s == nil {
		return nil
	}
	return append([]ACL(nil), s.all...)
}

// Len is the number of ACLs.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

// Decision is the outcome of Authorize: whether the permission is held and
// which ACL decided (nil when no ACL matched: default deny).
type Decision struct {
	Allowed bool
	By      *ACL
}

// Authorize decides whether p holds perm: denied if any matching ACL
// denies it, else allowed if one allows it, else denied (no ACL, no
// access). It does not allocate.
func (s *Set) Authorize(p Principal, perm Permission) Decision {
	if s == nil || !perm.Resource.valid() {
		return Decision{}
	}
	var allow *ACL
	list := s.byType[perm.Resource]
	for i := range list {
		a := &list[i]
		if !a.matchesName(perm.Name) || !a.matchesPrincipal(p) {
			continue
		}
		if a.Effect == Deny {
			if denies(a.Operation, perm.Op) {
				return Decision{Allowed: false, By: a}
			}
			continue
		}
		if allow == nil && grants(a.Operation, perm.Op) {
			allow = a
		}
	}
	return Decision{Allowed: allow != nil, By: allow}
}

// Filter selects ACLs; empty fields match everything.
type Filter struct {
	Principal string
	Resource  ResourceType
	Pattern   PatternType
	Name      string
	Operation Operation
	Effect    Effect
}

// Matches reports whether a passes the filter.
func (f Filter) Matches(a ACL) bool {
	return (f.Principal == "" || f.Principal == a.Principal) &&
		(f.Resource == 0 || f.Resource == a.Resource) &&
		(f.Pattern == 0 || f.Pattern == a.Pattern) &&
		(f.Name == "" || f.Name == a.Name) &&
		(f.Operation == 0 || f.Operation == a.Operation) &&
		(f.Effect == 0 || f.Effect == a.Effect)
}

// With returns a new set holding s's ACLs plus add (those already present
// are not repeated) and how many were new.
func (s *Set) With(add []ACL) (*Set, int, error) {
	before := s.Len()
	n, err := NewSet(append(s.ACLs(), add...))
	if err != nil {
		return nil, 0, err
	}
	return n, n.Len() - before, nil
}

// Without returns a new set without the ACLs equal to one of remove, and
// the removed ones.
func (s *Set) Without(remove []ACL) (*Set, []ACL) {
	drop := make(map[ACL]bool, len(remove))
	for _, a := range remove {
		drop[a] = true
	}
	n := &Set{}
	var removed []ACL
	for _, a := range s.ACLs() {
		if drop[a] {
			removed = append(removed, a)
			continue
		}
		n.all = append(n.all, a)
		n.byType[a.Resource] = append(n.byType[a.Resource], a)
	}
	return n, removed
}
