package replication

import (
	"context"
	"errors"
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/cleaner"
)

// Each data group replica runs a cleaner of its own (replication/cleaner;
// docs/architecture.md, "Data groups"), as the meta group does: while the
// replica leads its group, with a barrier of its term applied, it plans
// the retention and compaction of the group's partitions and proposes
// them into the group; on every replica it closes the segment files the
// group's applied trims and compactions retired. Each group's cleaner
// has its own --cleaner-io-max-bytes-per-second budget.

// groupCleanerNode is a data group replica as its cleaner sees it.
type groupCleanerNode struct {
	n  *Node
	dg *dataGroup
}

var _ cleaner.Node = groupCleanerNode{}

// IsLeader reports whether the replica leads its group with a barrier of
// its term applied (applying one first when it leads without, as
// servesNow does): it plans from a state that holds every committed
// entry.
func (g groupCleanerNode) IsLeader() bool {
	if g.dg.raft.State() == raft.Leader && !g.dg.leadsReady() {
		g.n.data.barrier(g.dg)
	}
	return g.dg.leadsReady()
}

// Propose proposes an encoded command into the group.
func (g groupCleanerNode) Propose(ctx context.Context, cmd []byte) error {
	_, err := g.n.proposeOn(ctx, g.dg.raft, g.dg.fsm, cmd)
	return err
}

// startCleaner starts dg's cleaner; stopCleaner ends it.
func (dg *dataGroup) startCleaner(n *Node, logger *slog.Logger) {
	dg.cleaner = cleaner.New(groupCleanerNode{n: n, dg: dg}, dg.fsm, cleaner.Options{Interval: n.cfg.CleanerInterval,
		IOBytesPerSec: n.cfg.CleanerIOBytesPerSec, Now: n.cfg.Now, Logger: logger})
	ctx, cancel := context.WithCancel(context.Background())
	dg.cleanerStop, dg.cleanerDone = cancel, make(chan struct{})
	go func() {
		defer close(dg.cleanerDone)
		dg.cleaner.Run(ctx)
	}()
}

// stopCleaner ends dg's cleaner and waits for its loop to return (a pass
// in progress finishes its partition first).
func (dg *dataGroup) stopCleaner() {
	if dg.cleanerStop == nil {
		return
	}
	dg.cleanerStop()
	<-dg.cleanerDone
}

// openReplicas returns the data group replicas this node runs.
func (d *dataGroups) openReplicas() []*dataGroup {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*dataGroup, 0, len(d.open))
	for _, dg := range d.open {
		out = append(out, dg)
	}
	return out
}

// Clean runs one cleaner pass now (cleaner.Cleaner.Pass) in the meta group
// and in each data group this node leads: for every partition it plans
// with the leader's clock, proposes a Trim where segments expired, and
// prepares and proposes a Compact where one is due. The meta group's pass
// needs this node to lead it (backend.ErrNotLeader otherwise); the data
// groups' passes run whether it does or not.
func (n *Node) Clean(ctx context.Context) error {
	errs := []error{n.cleaner.Pass(ctx)}
	for _, dg := range n.data.openReplicas() {
		if (groupCleanerNode{n: n, dg: dg}).IsLeader() {
			errs = append(errs, dg.cleaner.Pass(ctx))
		}
	}
	return errors.Join(errs...)
}

// CleanerStats returns the measurements of this node's cleaners, the meta
// group's and its data group replicas', added up (the last pass's
// duration is the longest of theirs).
func (n *Node) CleanerStats() backend.CleanerStats {
	out := n.cleaner.Stats()
	for _, dg := range n.data.openReplicas() {
		s := dg.cleaner.Stats()
		out.Runs += s.Runs
		out.Prepared += s.Prepared
		out.PreparedBytes += s.PreparedBytes
		out.PrepareDuration += s.PrepareDuration
		out.PassDuration += s.PassDuration
		out.LastPassDuration = max(out.LastPassDuration, s.LastPassDuration)
	}
	return out
}
