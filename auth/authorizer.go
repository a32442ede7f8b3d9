package auth

// Authorizer is the one decision of whether a caller holds a permission
// (docs/security.md, "ACLs"), shared by every front end so that the
// Connect API and the Kafka listener cannot disagree: with checks off
// (--auth none) every permission is held; a superuser holds every one;
// anyone else holds what the current ACLs grant (deny wins, no matching
// ACL denies). A front end decides who the caller is (authentication)
// and which permissions a call needs (its table); it asks an Authorizer
// whether the caller holds them.
//
// An Authorizer is immutable and safe for concurrent use; a decision
// takes no lock and allocates nothing.
type Authorizer struct {
	required   bool
	superusers map[Principal]bool
	acls       func() *Set
}

// NewAuthorizer returns the decision for a node: required switches the
// checks on (--auth required), superusers bypass the ACLs (--superuser),
// and acls returns the current ACLs (replicated state, read at every
// decision; a nil set grants nothing).
func NewAuthorizer(required bool, superusers []Principal, acls func() *Set) *Authorizer {
	a := &Authorizer{required: required, superusers: make(map[Principal]bool, len(superusers)), acls: acls}
	for _, p := range superusers {
		a.superusers[p] = true
	}
	return a
}

// Required reports whether permissions are checked at all.
func (a *Authorizer) Required() bool { return a.required }

// Superuser reports whether p is on the superuser list.
func (a *Authorizer) Superuser(p Principal) bool { return a.superusers[p] }

// Allowed reports whether p holds perm: always with checks off, always
// for a superuser, else when the ACLs grant it.
func (a *Authorizer) Allowed(p Principal, perm Permission) bool {
	if !a.required || a.superusers[p] {
		return true
	}
	return a.acls().Authorize(p, perm).Allowed
}
