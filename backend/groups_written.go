package backend

import (
	"context"
	"maps"
	"sync"
)

// GroupsWritten collects, for one call, the data groups it wrote to and
// the index each group's leader had applied when it acknowledged the
// write (docs/architecture.md, "Read guarantees"). The node a call was
// forwarded to answers them to the forwarding node, which then reads
// those groups no older than that (NoteGroupsApplied).
type GroupsWritten struct {
	mu sync.Mutex
	m  map[uint64]uint64 // guarded by mu
}

type groupsWrittenKey struct{}

// WithGroupsWritten returns ctx carrying a new GroupsWritten, which the
// backend fills while it serves a call under ctx.
func WithGroupsWritten(ctx context.Context) (context.Context, *GroupsWritten) {
	w := &GroupsWritten{}
	return context.WithValue(ctx, groupsWrittenKey{}, w), w
}

// NoteGroupWritten records in ctx's GroupsWritten, if it carries one,
// that a write to data group g was acknowledged at index applied.
func NoteGroupWritten(ctx context.Context, g, applied uint64) {
	w, ok := ctx.Value(groupsWrittenKey{}).(*GroupsWritten)
	if !ok || g == 0 || applied == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[uint64]uint64{}
	}
	w.m[g] = max(w.m[g], applied)
}

// Groups returns a copy of what was recorded: data group → applied index.
func (w *GroupsWritten) Groups() map[uint64]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.m)
}
