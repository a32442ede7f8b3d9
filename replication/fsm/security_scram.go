package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// SCRAM credentials (docs/security.md, "SCRAM credentials") are security
// state like tokens: replicated, set and deleted through Raft at
// SCRAMLevel, read without a lock by the Kafka listener on every SASL
// exchange, and kept in snapshots (the security section's scram list).
// A credential is keyed by its mechanism and user: a user may hold one of
// each mechanism.

// MaxSCRAMCredentials bounds the SCRAM credentials of the cluster.
const MaxSCRAMCredentials = 10_000

// scramKey is a credential's key in the state.
type scramKey struct {
	mech auth.SCRAMMechanism
	user string
}

// scramRecord is a credential as the cluster stores it, and who set it:
// the scram-set payload and a credential's entry in a snapshot.
type scramRecord struct {
	Credential auth.SCRAMCredential `json:"credential"`
	SetBy      string               `json:"set_by"`
	SetMs      int64                `json:"set_ms"`
}

// scramDelete is the scram-delete payload.
type scramDelete struct {
	User      string              `json:"user"`
	Mechanism auth.SCRAMMechanism `json:"mechanism"`
}

func (r *scramRecord) validate() error {
	if err := r.Credential.Validate(); err != nil {
		return invalid("scram credential", err)
	}
	if err := validPrincipal(r.SetBy); err != nil {
		return invalid("scram set_by", err)
	}
	if r.SetMs < 0 {
		return fmt.Errorf("%w: scram-set: negative time", backend.ErrInvalidArgument)
	}
	return nil
}

func (r *scramRecord) key() scramKey {
	return scramKey{mech: r.Credential.Mechanism, user: r.Credential.User}
}

func (r *scramRecord) info() backend.SCRAMInfo {
	c := &r.Credential
	return backend.SCRAMInfo{User: c.User, Mechanism: string(c.Mechanism), Iterations: c.Iterations, SetBy: r.SetBy, SetMs: r.SetMs}
}

func (d scramDelete) validate() error {
	if _, err := auth.ParseSCRAMMechanism(string(d.Mechanism)); err != nil {
		return invalid("scram-delete", err)
	}
	if err := auth.ValidName(d.User); err != nil {
		return invalid("scram-delete", fmt.Errorf("%w: user %q: %v", auth.ErrInvalidSCRAM, d.User, err))
	}
	return nil
}

func decodeSCRAMSet(p []byte) (scramRecord, error) {
	var r scramRecord
	if err := decodeStrict(p, &r); err != nil {
		return scramRecord{}, fmt.Errorf("%w: scram-set: %v", backend.ErrInvalidArgument, err)
	}
	if err := r.validate(); err != nil {
		return scramRecord{}, err
	}
	return r, nil
}

func decodeSCRAMDelete(p []byte) (scramDelete, error) {
	var d scramDelete
	if err := decodeStrict(p, &d); err != nil {
		return scramDelete{}, fmt.Errorf("%w: scram-delete: %v", backend.ErrInvalidArgument, err)
	}
	if err := d.validate(); err != nil {
		return scramDelete{}, err
	}
	return d, nil
}

// EncodeSCRAMSet encodes a scram-set of c (replacing the user's credential
// of that mechanism, if any), set by the principal setBy, stamped with now.
func EncodeSCRAMSet(now int64, c auth.SCRAMCredential, setBy string) ([]byte, error) {
	return encodeChecked(CmdSCRAMSet, now, scramRecord{Credential: c, SetBy: setBy, SetMs: now / 1e6}, decodeSCRAMSet)
}

// EncodeSCRAMDelete encodes a scram-delete of user's credential for m.
func EncodeSCRAMDelete(now int64, user string, m auth.SCRAMMechanism) ([]byte, error) {
	return encodeChecked(CmdSCRAMDelete, now, scramDelete{User: user, Mechanism: m}, decodeSCRAMDelete)
}

func (s *securityState) scramMap() map[scramKey]scramRecord {
	if m := s.scram.Load(); m != nil {
		return *m
	}
	return nil
}

// planSCRAMSet returns the credential map with r set; past
// MaxSCRAMCredentials it refuses (backend.ErrTooManySCRAM).
func (s *securityState) planSCRAMSet(r scramRecord) (map[scramKey]scramRecord, error) {
	cur := s.scramMap()
	_, replaces := cur[r.key()]
	if !replaces && len(cur) >= MaxSCRAMCredentials {
		return nil, fmt.Errorf("%w: the cluster holds %d SCRAM credentials, at most %d: delete some", backend.ErrTooManySCRAM, len(cur), MaxSCRAMCredentials)
	}
	next := maps.Clone(cur)
	if next == nil {
		next = map[scramKey]scramRecord{}
	}
	next[r.key()] = r
	return next, nil
}

// planSCRAMDelete returns the credential map without d's credential, and
// the credential removed; backend.ErrUnknownSCRAM when there is none.
func (s *securityState) planSCRAMDelete(d scramDelete) (map[scramKey]scramRecord, scramRecord, error) {
	cur := s.scramMap()
	k := scramKey{mech: d.Mechanism, user: d.User}
	r, ok := cur[k]
	if !ok {
		return nil, scramRecord{}, fmt.Errorf("%w: %s of user %s", backend.ErrUnknownSCRAM, d.Mechanism, d.User)
	}
	next := maps.Clone(cur)
	delete(next, k)
	return next, r, nil
}

// applySCRAMSet sets a user's credential for a mechanism; the result is
// its backend.SCRAMInfo.
func (f *FSM) applySCRAMSet(_ uint64, _ int64, r scramRecord) any {
	next, err := f.security.planSCRAMSet(r)
	if err != nil {
		return err
	}
	f.security.scram.Store(&next)
	return r.info()
}

// applySCRAMDelete deletes a user's credential for a mechanism: the next
// exchange with it is refused (a connection it authenticated stays
// authenticated, as with a revoked token). The result is the deleted
// credential's backend.SCRAMInfo.
func (f *FSM) applySCRAMDelete(_ uint64, _ int64, d scramDelete) any {
	next, r, err := f.security.planSCRAMDelete(d)
	if err != nil {
		return err
	}
	f.security.scram.Store(&next)
	return r.info()
}

// SCRAMCredential returns user's credential for m, for an exchange. It
// takes no lock; the credential's byte slices are shared with the state
// and must not be modified.
func (f *FSM) SCRAMCredential(user string, m auth.SCRAMMechanism) (auth.SCRAMCredential, bool) {
	r, ok := f.security.scramMap()[scramKey{mech: m, user: user}]
	return r.Credential, ok
}

// SCRAMCredentials lists the credentials' public fields, sorted by user,
// then mechanism.
func (f *FSM) SCRAMCredentials() []backend.SCRAMInfo {
	m := f.security.scramMap()
	out := make([]backend.SCRAMInfo, 0, len(m))
	for _, r := range m {
		out = append(out, r.info())
	}
	slices.SortFunc(out, func(a, b backend.SCRAMInfo) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
	})
	return out
}

// CheckSCRAMSet refuses early, at the proposer, a scram-set Apply would
// refuse now.
func (f *FSM) CheckSCRAMSet(c auth.SCRAMCredential, setBy string) error {
	r := scramRecord{Credential: c, SetBy: setBy}
	if err := r.validate(); err != nil {
		return err
	}
	_, err := f.security.planSCRAMSet(r)
	return err
}

// snapshotSCRAM is the credentials sorted by user, then mechanism.
func (s *securityState) snapshotSCRAM() []scramRecord {
	m := s.scramMap()
	keys := slices.SortedFunc(maps.Keys(m), func(a, b scramKey) int {
		return cmp.Or(cmp.Compare(a.user, b.user), cmp.Compare(a.mech, b.mech))
	})
	out := make([]scramRecord, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// decodeSCRAM checks a snapshot's credentials: every one must validate,
// none listed twice.
func decodeSCRAM(list []scramRecord) (map[scramKey]scramRecord, error) {
	out := make(map[scramKey]scramRecord, len(list))
	for _, r := range list {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		if _, dup := out[r.key()]; dup {
			return nil, fmt.Errorf("restore: %s credential of user %s listed twice", r.Credential.Mechanism, r.Credential.User)
		}
		out[r.key()] = r
	}
	return out, nil
}
