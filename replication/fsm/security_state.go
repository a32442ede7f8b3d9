package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// Bounds of the security state: each token and ACL costs every node memory
// and every snapshot bytes, and front ends read them on every call.
const (
	// MaxTokens bounds the live tokens of the cluster.
	MaxTokens = 10_000
	// MaxACLs bounds the ACLs of the cluster.
	MaxACLs = 10_000
)

// securityState is the replicated tokens and ACLs (docs/security.md). The
// FSM goroutine replaces them whole on each change; front ends read them on
// every call from their own goroutines, so each is an immutable value
// behind an atomic pointer: a read takes no lock and allocates nothing.
// Tokens and ACLs change rarely, so copying on each change is cheap.
type securityState struct {
	// tokens by id; the map is never modified once stored.
	tokens atomic.Pointer[map[string]tokenRecord]
	// acls is never nil once the FSM is made.
	acls atomic.Pointer[auth.Set]
	// scram is the SCRAM credentials (security_scram.go); the map is
	// never modified once stored.
	scram atomic.Pointer[map[scramKey]scramRecord]
}

// noACLs is the empty set: it allows nothing.
var noACLs = &auth.Set{}

func (s *securityState) tokenMap() map[string]tokenRecord {
	if m := s.tokens.Load(); m != nil {
		return *m
	}
	return nil
}

func (s *securityState) aclSet() *auth.Set {
	if a := s.acls.Load(); a != nil {
		return a
	}
	return noACLs
}

func (s *securityState) install(tokens map[string]tokenRecord, acls *auth.Set, scram map[scramKey]scramRecord) {
	if acls == nil {
		acls = noACLs
	}
	s.tokens.Store(&tokens)
	s.acls.Store(acls)
	s.scram.Store(&scram)
}

func (r tokenRecord) info() backend.TokenInfo {
	v := &r.Verifier
	return backend.TokenInfo{ID: v.ID, Principal: v.Principal, Description: v.Description, CreatedMs: v.CreatedMs, ExpiresMs: v.ExpiresMs, CreatedBy: r.CreatedBy}
}

// expired reports whether the token no longer works at nowMs.
func (r *tokenRecord) expired(nowMs int64) bool {
	return r.Verifier.ExpiresMs != 0 && nowMs >= r.Verifier.ExpiresMs
}

// Token returns the verifier of the token id, for authenticating a call.
// It takes no lock and allocates nothing; the verifier's byte slices are
// shared with the state and must not be modified.
func (f *FSM) Token(id string) (auth.Verifier, bool) {
	r, ok := f.security.tokenMap()[id]
	return r.Verifier, ok
}

// Tokens lists the stored tokens, sorted by principal, then creation time,
// then id. Expired tokens are listed until they are dropped (planTokenCreate).
func (f *FSM) Tokens() []backend.TokenInfo {
	m := f.security.tokenMap()
	out := make([]backend.TokenInfo, 0, len(m))
	for _, r := range m {
		out = append(out, r.info())
	}
	slices.SortFunc(out, func(a, b backend.TokenInfo) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.CreatedMs, b.CreatedMs), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// ACLs returns the ACLs as applied, never nil. The set is immutable; an
// applied change swaps in a new one, so a caller holding this one keeps a
// consistent view. It takes no lock and allocates nothing.
func (f *FSM) ACLs() *auth.Set { return f.security.aclSet() }

// planTokenCreate returns the token map with r added, at the state
// machine's time nowMs. At MaxTokens live tokens it refuses
// (backend.ErrTooManyTokens); to make room it drops tokens expired at nowMs, which
// no call can use any more. Nothing is changed.
func (s *securityState) planTokenCreate(r tokenRecord, nowMs int64) (map[string]tokenRecord, error) {
	cur := s.tokenMap()
	if _, ok := cur[r.Verifier.ID]; ok {
		return nil, fmt.Errorf("%w: %s", backend.ErrTokenExists, r.Verifier.ID)
	}
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]tokenRecord{}
	}
	if len(next) >= MaxTokens {
		maps.DeleteFunc(next, func(_ string, t tokenRecord) bool { return t.expired(nowMs) })
		if len(next) >= MaxTokens {
			return nil, fmt.Errorf("%w: the cluster holds %d live tokens, at most %d: revoke some", backend.ErrTooManyTokens, len(next), MaxTokens)
		}
	}
	next[r.Verifier.ID] = r
	return next, nil
}

// planTokenRevoke returns the token map without id, and the token removed.
func (s *securityState) planTokenRevoke(id string) (map[string]tokenRecord, tokenRecord, error) {
	cur := s.tokenMap()
	r, ok := cur[id]
	if !ok {
		return nil, tokenRecord{}, fmt.Errorf("%w: %s", backend.ErrUnknownToken, id)
	}
	next := maps.Clone(cur)
	delete(next, id)
	return next, r, nil
}

// planACLCreate returns the ACL set with acls added (those present are
// kept once) and how many were new; past MaxACLs it refuses.
func (s *securityState) planACLCreate(acls []auth.ACL) (*auth.Set, int, error) {
	cur := s.aclSet()
	next, added, err := cur.With(acls)
	if err != nil {
		return nil, 0, invalid("acl-create", err)
	}
	if next.Len() > MaxACLs {
		return nil, 0, fmt.Errorf("%w: the cluster holds %d ACLs, adding %d would pass %d", backend.ErrTooManyACLs, cur.Len(), added, MaxACLs)
	}
	return next, added, nil
}

// matchACLs returns the ACLs f selects, in the set's order.
func matchACLs(set *auth.Set, f auth.Filter) []auth.ACL {
	var out []auth.ACL
	for _, a := range set.ACLs() {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// CheckTokenCreate refuses early, at the proposer, a token-create Apply
// would refuse now (nowNanos: the proposer's time); only Apply's answer is
// final.
func (f *FSM) CheckTokenCreate(nowNanos int64, v auth.Verifier, createdBy string) error {
	r := tokenRecord{Verifier: v, CreatedBy: createdBy}
	if err := r.validate(); err != nil {
		return err
	}
	_, err := f.security.planTokenCreate(r, nowNanos/1e6)
	return err
}

// CheckACLCreate refuses early a creation of acls Apply would refuse now.
func (f *FSM) CheckACLCreate(acls []auth.ACL) error {
	if err := validateACLs(acls); err != nil {
		return err
	}
	_, _, err := f.security.planACLCreate(acls)
	return err
}

// MatchACLs returns the applied ACLs a delete with filter flt would remove
// now (ValidateACLFilter first): what a dry run shows.
func (f *FSM) MatchACLs(flt auth.Filter) ([]auth.ACL, error) {
	if err := ValidateACLFilter(flt); err != nil {
		return nil, err
	}
	return matchACLs(f.ACLs(), flt), nil
}

// securityManifestVersion versions the security part of a snapshot.
const securityManifestVersion = 1

// securityManifest is the tokens (sorted by id), the ACLs (in the set's
// order) and the SCRAM credentials (sorted by user, then mechanism) in a
// snapshot; absent when there are none, as in snapshots taken before they
// existed. SCRAM credentials exist only from SCRAMLevel on, so a build
// below it never reads a snapshot that lists them.
type securityManifest struct {
	Version int           `json:"version"`
	Tokens  []tokenRecord `json:"tokens,omitempty"`
	ACLs    []auth.ACL    `json:"acls,omitempty"`
	SCRAM   []scramRecord `json:"scram,omitempty"`
}

// snapshotSecurity captures the state; nil when there is none.
func (f *FSM) snapshotSecurity() *securityManifest {
	m, acls := f.security.tokenMap(), f.ACLs()
	if len(m) == 0 && acls.Len() == 0 && len(f.security.scramMap()) == 0 {
		return nil
	}
	out := &securityManifest{Version: securityManifestVersion, ACLs: acls.ACLs(), SCRAM: f.security.snapshotSCRAM()}
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out.Tokens = append(out.Tokens, m[id])
	}
	return out
}

// decodeSecurity checks a snapshot's security section and returns the
// state it holds (nil: empty). Every token and ACL must validate: a
// snapshot is read as strictly as a command.
func decodeSecurity(m *securityManifest) (map[string]tokenRecord, *auth.Set, map[scramKey]scramRecord, error) {
	tokens := map[string]tokenRecord{}
	if m == nil {
		return tokens, noACLs, map[scramKey]scramRecord{}, nil
	}
	if m.Version != securityManifestVersion {
		return nil, nil, nil, fmt.Errorf("restore: %w: security manifest version %d", backend.ErrUnknownCommand, m.Version)
	}
	for _, r := range m.Tokens {
		if err := r.validate(); err != nil {
			return nil, nil, nil, fmt.Errorf("restore: %w", err)
		}
		if _, dup := tokens[r.Verifier.ID]; dup {
			return nil, nil, nil, fmt.Errorf("restore: token %s listed twice", r.Verifier.ID)
		}
		tokens[r.Verifier.ID] = r
	}
	acls, err := auth.NewSet(m.ACLs)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("restore: %w", err)
	}
	scram, err := decodeSCRAM(m.SCRAM)
	if err != nil {
		return nil, nil, nil, err
	}
	return tokens, acls, scram, nil
}
