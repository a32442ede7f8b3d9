package replication

import (
	"context"
	"fmt"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// Tokens and ACLs (docs/security.md) are replicated state: changes go
// through Raft like every write (so only the leader proposes them, and
// only once every member's build understands them: fsm.SecurityLevel),
// reads answer from this node's applied state without a lock, as a front
// end needs on every call.

// securityNow is the time a security command is stamped with, and checked
// against before it is proposed: never behind the state machine's clock,
// which Apply uses (token expiry).
func (b *Backend) securityNow() int64 { return max(b.cfg.Now().UnixNano(), b.fsm.Now()) }

// checksState reports whether this node's applied state is complete enough
// to refuse a security change early: it has applied its whole log (not so
// right after an election, or while other proposals are in flight, when
// an early refusal could rest on a state Apply will not see). Apply checks
// the same rules anyway; only its answer is final.
func (b *Backend) checksState() bool { return b.fsm.AppliedIndex() >= b.raft.LastIndex() }

// CreateToken stores v, the verifier of a new token, through Raft;
// createdBy is the principal creating it ("User:admin"). An invalid v or
// createdBy is backend.ErrInvalidArgument (and auth.ErrInvalidToken or
// auth.ErrInvalidPrincipal); an id already stored backend.ErrTokenExists; a full
// cluster backend.ErrTooManyTokens.
func (b *Backend) CreateToken(ctx context.Context, v auth.Verifier, createdBy string) error {
	now := b.securityNow()
	data, err := fsm.EncodeTokenCreate(now, v, createdBy)
	if err != nil {
		return err
	}
	if b.checksState() {
		if err := b.fsm.CheckTokenCreate(now, v, createdBy); err != nil {
			return err
		}
	}
	_, err = b.propose(ctx, data)
	return err
}

// RevokeToken removes the token id through Raft and returns what it was;
// backend.ErrUnknownToken if no such token is stored.
func (b *Backend) RevokeToken(ctx context.Context, id string) (backend.TokenInfo, error) {
	data, err := fsm.EncodeTokenRevoke(b.securityNow(), id)
	if err != nil {
		return backend.TokenInfo{}, err
	}
	if _, ok := b.fsm.Token(id); !ok && b.checksState() {
		return backend.TokenInfo{}, fmt.Errorf("%w: %s", backend.ErrUnknownToken, id)
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return backend.TokenInfo{}, err
	}
	info, ok := res.(backend.TokenInfo)
	if !ok {
		return backend.TokenInfo{}, fmt.Errorf("revoke token: unexpected result %T", res)
	}
	return info, nil
}

// Tokens lists the tokens applied on this node, sorted by principal, then
// creation time (then id).
func (b *Backend) Tokens() []backend.TokenInfo { return b.fsm.Tokens() }

// Token returns the verifier of the token id as applied on this node, for
// authenticating a call: no lock, no allocation. The verifier's byte
// slices are shared with the state and must not be modified.
func (b *Backend) Token(id string) (auth.Verifier, bool) { return b.fsm.Token(id) }

// CreateACLs adds acls through Raft and returns how many were new (those
// already present are kept once). An invalid ACL, or none, is
// backend.ErrInvalidArgument (and auth.ErrInvalidACL); more than MaxACLs in all
// backend.ErrTooManyACLs.
func (b *Backend) CreateACLs(ctx context.Context, acls []auth.ACL) (created int, err error) {
	data, err := fsm.EncodeACLCreate(b.securityNow(), acls)
	if err != nil {
		return 0, err
	}
	if b.checksState() {
		if err := b.fsm.CheckACLCreate(acls); err != nil {
			return 0, err
		}
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return 0, err
	}
	n, ok := res.(int)
	if !ok {
		return 0, fmt.Errorf("create ACLs: unexpected result %T", res)
	}
	return n, nil
}

// DeleteACLs removes the ACLs f matches through Raft and returns them, in
// the set's order (none matching is no error). With dryRun it changes
// nothing and returns what this node's applied ACLs would lose. A filter
// with no field set, or an invalid one, is backend.ErrInvalidArgument.
func (b *Backend) DeleteACLs(ctx context.Context, f auth.Filter, dryRun bool) ([]auth.ACL, error) {
	matched, err := b.fsm.MatchACLs(f)
	if err != nil || dryRun {
		return matched, err
	}
	data, err := fsm.EncodeACLDelete(b.securityNow(), f)
	if err != nil {
		return nil, err
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return nil, err
	}
	removed, ok := res.([]auth.ACL)
	if !ok {
		return nil, fmt.Errorf("delete ACLs: unexpected result %T", res)
	}
	return removed, nil
}

// ACLs returns the ACL set applied on this node, never nil: immutable, read
// without a lock or an allocation (auth.Set.Authorize allocates nothing
// either), replaced whole when a change is applied.
func (b *Backend) ACLs() *auth.Set { return b.fsm.ACLs() }

// SetSCRAMCredential sets c, a user's SCRAM credential for one mechanism
// (replacing the one it held), through Raft, once every member's build
// understands it (fsm.SCRAMLevel); setBy is the principal setting it. An
// invalid c or setBy is backend.ErrInvalidArgument (and
// auth.ErrInvalidSCRAM or auth.ErrInvalidPrincipal); a full cluster
// backend.ErrTooManySCRAM.
func (b *Backend) SetSCRAMCredential(ctx context.Context, c auth.SCRAMCredential, setBy string) (backend.SCRAMInfo, error) {
	data, err := fsm.EncodeSCRAMSet(b.securityNow(), c, setBy)
	if err != nil {
		return backend.SCRAMInfo{}, err
	}
	if b.checksState() {
		if err := b.fsm.CheckSCRAMSet(c, setBy); err != nil {
			return backend.SCRAMInfo{}, err
		}
	}
	return b.proposeSCRAM(ctx, data, "set SCRAM credential")
}

// DeleteSCRAMCredential deletes user's SCRAM credential for m through Raft
// and returns what it was; backend.ErrUnknownSCRAM if the user holds none.
func (b *Backend) DeleteSCRAMCredential(ctx context.Context, user string, m auth.SCRAMMechanism) (backend.SCRAMInfo, error) {
	data, err := fsm.EncodeSCRAMDelete(b.securityNow(), user, m)
	if err != nil {
		return backend.SCRAMInfo{}, err
	}
	if _, ok := b.fsm.SCRAMCredential(user, m); !ok && b.checksState() {
		return backend.SCRAMInfo{}, fmt.Errorf("%w: %s of user %s", backend.ErrUnknownSCRAM, m, user)
	}
	return b.proposeSCRAM(ctx, data, "delete SCRAM credential")
}

// proposeSCRAM proposes a SCRAM command and returns its result.
func (b *Backend) proposeSCRAM(ctx context.Context, data []byte, what string) (backend.SCRAMInfo, error) {
	res, err := b.propose(ctx, data)
	if err != nil {
		return backend.SCRAMInfo{}, err
	}
	info, ok := res.(backend.SCRAMInfo)
	if !ok {
		return backend.SCRAMInfo{}, fmt.Errorf("%s: unexpected result %T", what, res)
	}
	return info, nil
}

// SCRAMCredentials lists the SCRAM credentials applied on this node
// (never their keys), sorted by user, then mechanism.
func (b *Backend) SCRAMCredentials() []backend.SCRAMInfo { return b.fsm.SCRAMCredentials() }

// SCRAMCredential returns user's credential for m as applied on this node,
// for a SASL exchange: no lock. Its byte slices are shared with the state
// and must not be modified.
func (b *Backend) SCRAMCredential(user string, m auth.SCRAMMechanism) (auth.SCRAMCredential, bool) {
	return b.fsm.SCRAMCredential(user, m)
}
