package server

import (
	"fmt"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// Conversions between the API's tokens and ACLs and package auth's.

func tokenInfoProto(t backend.TokenInfo) *logdv1.TokenInfo {
	return &logdv1.TokenInfo{Id: t.ID, Principal: t.Principal, Description: t.Description, CreatedMs: t.CreatedMs, ExpiresMs: t.ExpiresMs, CreatedBy: t.CreatedBy}
}

func aclProto(a auth.ACL) *logdv1.ACL {
	return &logdv1.ACL{Principal: a.Principal, Resource: a.Resource.String(), Pattern: a.Pattern.String(), Name: a.Name,
		Operation: a.Operation.String(), Effect: a.Effect.String()}
}

// aclFromProto parses and validates an ACL of a request.
func aclFromProto(m *logdv1.ACL) (auth.ACL, error) {
	if m == nil {
		return auth.ACL{}, fmt.Errorf("%w: empty ACL", auth.ErrInvalidACL)
	}
	a := auth.ACL{Principal: m.Principal, Name: m.Name}
	var err error
	if a.Resource, err = auth.ParseResourceType(m.Resource); err != nil {
		return a, err
	}
	if a.Pattern, err = auth.ParsePatternType(m.Pattern); err != nil {
		return a, err
	}
	if a.Operation, err = auth.ParseOperation(m.Operation); err != nil {
		return a, err
	}
	if a.Effect, err = auth.ParseEffect(m.Effect); err != nil {
		return a, err
	}
	if a.Principal != auth.AnyPrincipal {
		// "alice" means "User:alice", as in CreateToken.
		if p, perr := auth.ParsePrincipal(a.Principal); perr == nil {
			a.Principal = p.String()
		}
	}
	return a, a.Validate()
}

// filterFromProto parses an ACL filter; empty fields match everything.
func filterFromProto(m *logdv1.ACLFilter) (auth.Filter, error) {
	var f auth.Filter
	if m == nil {
		return f, nil
	}
	f.Principal, f.Name = m.Principal, m.Name
	if f.Principal != "" && f.Principal != auth.AnyPrincipal {
		p, err := auth.ParsePrincipal(f.Principal)
		if err != nil {
			return f, fmt.Errorf("%w: %v", auth.ErrInvalidACL, err)
		}
		f.Principal = p.String()
	}
	var err error
	if m.Resource != "" {
		if f.Resource, err = auth.ParseResourceType(m.Resource); err != nil {
			return f, err
		}
	}
	if m.Pattern != "" {
		if f.Pattern, err = auth.ParsePatternType(m.Pattern); err != nil {
			return f, err
		}
	}
	if m.Operation != "" {
		if f.Operation, err = auth.ParseOperation(m.Operation); err != nil {
			return f, err
		}
	}
	if m.Effect != "" {
		if f.Effect, err = auth.ParseEffect(m.Effect); err != nil {
			return f, err
		}
	}
	return f, nil
}
