package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// The security commands (tokens and ACLs, docs/security.md) carry strict
// JSON: an unknown field, trailing data or a value auth's Validate refuses
// is an error, never guessed at. The proposer encodes through the Encode
// functions below, which refuse what the decoders would; an entry that
// reaches Apply anyway is refused there with the same error on every
// replica and changes nothing (securityCommand), since refusing is as
// deterministic as applying. The validation rules are therefore part of
// SecurityLevel: a build that changes them needs a new payload version.

// tokenRecord is a token as the cluster stores it: the verifier, never the
// secret, and who created it. It is the token-create payload and a token's
// entry in a snapshot.
type tokenRecord struct {
	Verifier  auth.Verifier `json:"verifier"`
	CreatedBy string        `json:"created_by"`
}

// tokenRevoke is the token-revoke payload.
type tokenRevoke struct {
	ID string `json:"id"`
}

// aclCreate is the acl-create payload.
type aclCreate struct {
	ACLs []auth.ACL `json:"acls"`
}

// aclDelete is the acl-delete payload.
type aclDelete struct {
	Filter aclFilter `json:"filter"`
}

// aclFilter is auth.Filter in JSON: enums by name, empty fields left out
// (a zero enum has no name).
type aclFilter struct {
	Principal string            `json:"principal,omitempty"`
	Resource  auth.ResourceType `json:"resource,omitempty"`
	Pattern   auth.PatternType  `json:"pattern,omitempty"`
	Name      string            `json:"name,omitempty"`
	Operation auth.Operation    `json:"operation,omitempty"`
	Effect    auth.Effect       `json:"effect,omitempty"`
}

func (w aclFilter) filter() auth.Filter {
	return auth.Filter{Principal: w.Principal, Resource: w.Resource, Pattern: w.Pattern, Name: w.Name, Operation: w.Operation, Effect: w.Effect}
}

func wireFilter(f auth.Filter) aclFilter {
	return aclFilter{Principal: f.Principal, Resource: f.Resource, Pattern: f.Pattern, Name: f.Name, Operation: f.Operation, Effect: f.Effect}
}

// invalid wraps a validation error so that both backend.ErrInvalidArgument (the
// server's INVALID_ARGUMENT) and auth's own sentinel match it.
func invalid(name string, err error) error {
	return fmt.Errorf("%w: %s: %w", backend.ErrInvalidArgument, name, err)
}

// decodeStrict decodes p, one JSON value, into v: unknown fields and
// anything after the value are errors.
func decodeStrict(p []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// validPrincipal checks that s is a principal in its canonical form
// ("User:alice", not "alice").
func validPrincipal(s string) error {
	p, err := auth.ParsePrincipal(s)
	if err != nil {
		return err
	}
	if p.String() != s {
		return fmt.Errorf("%w %q: write it as %q", auth.ErrInvalidPrincipal, s, p.String())
	}
	return nil
}

func (r tokenRecord) validate() error {
	if err := r.Verifier.Validate(); err != nil {
		return invalid("token", err)
	}
	if err := validPrincipal(r.CreatedBy); err != nil {
		return invalid("token created_by", err)
	}
	return nil
}

func validateACLs(acls []auth.ACL) error {
	switch {
	case len(acls) == 0:
		return fmt.Errorf("%w: no ACLs", backend.ErrInvalidArgument)
	case len(acls) > MaxACLs:
		return fmt.Errorf("%w: %d ACLs in one change, at most %d", backend.ErrTooManyACLs, len(acls), MaxACLs)
	}
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return invalid("acl", err)
		}
	}
	return nil
}

// ValidateACLFilter checks a filter that selects ACLs to delete: every
// field set must be valid, and at least one must be set, so no change
// deletes every ACL by accident.
func ValidateACLFilter(f auth.Filter) error {
	if f == (auth.Filter{}) {
		return fmt.Errorf("%w: an ACL filter must set at least one field", backend.ErrInvalidArgument)
	}
	if f.Principal != "" && f.Principal != auth.AnyPrincipal {
		if err := validPrincipal(f.Principal); err != nil {
			return invalid("acl filter", err)
		}
	}
	if f.Name != "" && f.Name != "*" {
		if err := auth.ValidName(f.Name); err != nil {
			return invalid("acl filter", fmt.Errorf("%w: name %q: %v", auth.ErrInvalidACL, f.Name, err))
		}
	}
	if err := validEnums(f); err != nil {
		return invalid("acl filter", err)
	}
	return nil
}

// validEnums checks the filter's enums that are set: each must have a
// name (MarshalText refuses one that has not).
func validEnums(f auth.Filter) error {
	check := func(set bool, m interface{ MarshalText() ([]byte, error) }) error {
		if !set {
			return nil
		}
		_, err := m.MarshalText()
		return err
	}
	return errors.Join(check(f.Resource != 0, f.Resource), check(f.Pattern != 0, f.Pattern),
		check(f.Operation != 0, f.Operation), check(f.Effect != 0, f.Effect))
}

func decodeTokenCreate(p []byte) (tokenRecord, error) {
	var r tokenRecord
	if err := decodeStrict(p, &r); err != nil {
		return tokenRecord{}, fmt.Errorf("%w: token-create: %v", backend.ErrInvalidArgument, err)
	}
	if err := r.validate(); err != nil {
		return tokenRecord{}, err
	}
	return r, nil
}

func decodeTokenRevoke(p []byte) (tokenRevoke, error) {
	var r tokenRevoke
	if err := decodeStrict(p, &r); err != nil {
		return tokenRevoke{}, fmt.Errorf("%w: token-revoke: %v", backend.ErrInvalidArgument, err)
	}
	if err := auth.ValidTokenID(r.ID); err != nil {
		return tokenRevoke{}, invalid("token-revoke", err)
	}
	return r, nil
}

func decodeACLCreate(p []byte) (aclCreate, error) {
	var c aclCreate
	if err := decodeStrict(p, &c); err != nil {
		return aclCreate{}, fmt.Errorf("%w: acl-create: %v", backend.ErrInvalidArgument, err)
	}
	if err := validateACLs(c.ACLs); err != nil {
		return aclCreate{}, err
	}
	return c, nil
}

func decodeACLDelete(p []byte) (auth.Filter, error) {
	var d aclDelete
	if err := decodeStrict(p, &d); err != nil {
		return auth.Filter{}, fmt.Errorf("%w: acl-delete: %v", backend.ErrInvalidArgument, err)
	}
	f := d.Filter.filter()
	if err := ValidateACLFilter(f); err != nil {
		return auth.Filter{}, err
	}
	return f, nil
}

// checked is a security command's decoded payload, or why it was refused.
type checked[T any] struct {
	v   T
	err error
}

// securityCommand is a row for a security kind (SecurityLevel, payload
// version 1, strict JSON read by decode). A payload decode refuses does not
// stop the node: apply answers with decode's error and changes nothing.
func securityCommand[T any](name string, decode func([]byte) (T, error), apply func(f *FSM, index uint64, now int64, c T) any) command {
	return leveledSecurityCommand(name, SecurityLevel, decode, apply)
}

// leveledSecurityCommand is securityCommand for a kind introduced at level.
func leveledSecurityCommand[T any](name string, level FeatureLevel, decode func([]byte) (T, error), apply func(f *FSM, index uint64, now int64, c T) any) command {
	return row(name, level, []payloadVersion{{version: commandVersion, level: level}}, func(p []byte, _ byte, _ *keyScratch) (checked[T], error) {
		v, err := decode(p)
		return checked[T]{v: v, err: err}, nil
	}, func(f *FSM, index uint64, now int64, c checked[T]) any {
		if c.err != nil {
			return c.err
		}
		return apply(f, index, now, c.v)
	})
}

// encodeChecked encodes body as a command of type t, stamped with now,
// after checking that decode accepts the payload: the proposer refuses what
// every replica would.
func encodeChecked[T any](t CommandType, now int64, body any, decode func([]byte) (T, error)) ([]byte, error) {
	data, err := encodeJSONCommand(t, now, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", backend.ErrInvalidArgument, err)
	}
	if _, err := decode(data[cmdHeaderSize:]); err != nil {
		return nil, err
	}
	return data, nil
}

// EncodeTokenCreate encodes a token-create of v, created by the principal
// createdBy ("User:admin"), stamped with now; it refuses an invalid v or
// createdBy. The result is unsealed (Seal).
func EncodeTokenCreate(now int64, v auth.Verifier, createdBy string) ([]byte, error) {
	return encodeChecked(CmdTokenCreate, now, tokenRecord{Verifier: v, CreatedBy: createdBy}, decodeTokenCreate)
}

// EncodeTokenRevoke encodes a token-revoke of the token id.
func EncodeTokenRevoke(now int64, id string) ([]byte, error) {
	return encodeChecked(CmdTokenRevoke, now, tokenRevoke{ID: id}, decodeTokenRevoke)
}

// EncodeACLCreate encodes an acl-create of acls (1 to MaxACLs valid ACLs).
func EncodeACLCreate(now int64, acls []auth.ACL) ([]byte, error) {
	if err := validateACLs(acls); err != nil {
		return nil, err
	}
	return encodeChecked(CmdACLCreate, now, aclCreate{ACLs: acls}, decodeACLCreate)
}

// EncodeACLDelete encodes an acl-delete of the ACLs f matches
// (ValidateACLFilter).
func EncodeACLDelete(now int64, f auth.Filter) ([]byte, error) {
	if err := ValidateACLFilter(f); err != nil {
		return nil, err
	}
	return encodeChecked(CmdACLDelete, now, aclDelete{Filter: wireFilter(f)}, decodeACLDelete)
}
