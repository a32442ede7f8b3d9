package fsm

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/logd-dev/logd/backend"
)

// AppendMany is several appends the leader coalesced into one Raft entry
// (docs/architecture.md, "Coalesced appends"): each element is an
// unsealed encoded append command (EncodeAppend), applied in order as if
// each were its own entry at the same index, with its own result. One
// append's refusal never touches another's.
type AppendMany struct {
	// Entries are the encoded appends; they alias the entry's data.
	Entries [][]byte
}

// MaxAppendMany bounds the appends in one coalesced entry.
const MaxAppendMany = 1024

// EncodeAppendMany encodes appends (each from EncodeAppend, unsealed) as
// one append-many command stamped now.
func EncodeAppendMany(now int64, entries [][]byte) []byte {
	n := cmdHeaderSize + binary.MaxVarintLen64 + entryChecksumSize
	for _, e := range entries {
		n += binary.MaxVarintLen64 + len(e)
	}
	dst := encodeHeader(make([]byte, 0, n), CmdAppendMany, now)
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(len(e)))
		dst = append(dst, e...)
	}
	return dst
}

// decodeAppendMany splits the payload into its appends and checks that
// each is an unsealed append of a payload version this build reads, so
// that a malformed entry stops every replica at decode, the same way.
func decodeAppendMany(r *reader, _ byte) AppendMany {
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > MaxAppendMany) {
		r.err = fmt.Errorf("%d appends, want 1 to %d", n, MaxAppendMany)
	}
	var m AppendMany
	for i := uint64(0); i < n && r.err == nil; i++ {
		e := r.bytes()
		if r.err != nil {
			break
		}
		switch {
		case len(e) < cmdHeaderSize:
			r.err = fmt.Errorf("append %d: %d bytes", i, len(e))
		case CommandType(e[0]) != CmdAppend:
			r.err = fmt.Errorf("append %d: a %s command", i, CommandType(e[0]))
		case e[1]&entryChecksumFlag != 0:
			r.err = fmt.Errorf("append %d: sealed", i)
		default:
			if _, ok := appendLevel(e[1]); !ok {
				r.err = fmt.Errorf("append %d: version %d", i, e[1])
			}
		}
		m.Entries = append(m.Entries, e)
	}
	return m
}

// applyAppendMany applies each append of m at index, in order, and returns
// their results ([]any, one per append: an AppendResult or an error).
// Appends to one partition at one index stay exact on replay: see
// partitionWritten.
func (f *FSM) applyAppendMany(index uint64, _ int64, m AppendMany) any {
	out := make([]any, len(m.Entries))
	for i, e := range m.Entries {
		out[i] = f.applyCoalesced(index, e)
		if f.Failed() != nil {
			return out[i]
		}
	}
	return out
}

// AppendManyResults returns the per-append results of an applied
// append-many entry, or an error when the entry failed as a whole.
func AppendManyResults(res any, n int) ([]any, error) {
	switch r := res.(type) {
	case []any:
		if len(r) != n {
			return nil, fmt.Errorf("%w: %d results for %d appends", backend.ErrBadCommand, len(r), n)
		}
		return r, nil
	case error:
		return nil, r
	}
	return nil, fmt.Errorf("append-many: unexpected result %T", res)
}

// appendLevel is the feature level of an append's payload version.
func appendLevel(version byte) (FeatureLevel, bool) {
	for _, v := range appendVersions {
		if v.version == version {
			return v.level, true
		}
	}
	return 0, false
}

// applyCoalesced applies one append of an append-many entry at index, as
// applyOne would were it its own entry (the append is an unsealed append
// command, checked by decodeAppendMany).
func (f *FSM) applyCoalesced(index uint64, e []byte) any {
	level, _ := appendLevel(e[1])
	a, err := decodeAppendPayload(e[cmdHeaderSize:], e[1], &f.keyScratch)
	if err != nil {
		// A body that does not decode is damage every replica sees alike.
		return f.stop(fmt.Errorf("apply index %d: %w", index, err))
	}
	if t := int64(binary.BigEndian.Uint64(e[2:10])); t > f.now.Load() {
		f.now.Store(t)
	}
	if level > f.AppliedLevel() {
		if err := f.raiseLevel(level, f.now.Load()); err != nil {
			return f.stop(fmt.Errorf("apply index %d: %w", index, err))
		}
	}
	res := f.applyAppend(index, f.now.Load(), a)
	if f.logger.Enabled(context.Background(), slog.LevelDebug) {
		f.logger.Debug("applied", "index", index, "command", "append (coalesced)", "result", resultSummary(res))
	}
	return res
}
