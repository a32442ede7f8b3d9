package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
)

// Reads that see writes (docs/architecture.md, "Read guarantees"): a read
// may name a Raft index it must see, and the node serving it waits until
// it has applied that index. The index comes from the leader: the one it
// had applied when it answered a write (server/forward.go passes it back
// to the follower that forwarded the write), or its ReadIndex (a
// linearizable read's start).

// AppliedIndex returns the Raft index of the last entry this node applied.
func (b *Backend) AppliedIndex() uint64 { return b.fsm.AppliedIndex() }

// AwaitApplied waits until this node has applied index, at most wait and
// while ctx lasts. Past wait it fails with *backend.BehindError naming the
// leader, which has applied everything it acknowledged.
func (b *Backend) AwaitApplied(ctx context.Context, index uint64, wait time.Duration) error {
	return b.awaitApplies(ctx, wait, func() string {
		if have := b.fsm.AppliedIndex(); have < index {
			return fmt.Sprintf("raft index %d (this node applied %d)", index, have)
		}
		return ""
	})
}

// awaitApplies waits while lacking names something this node has not
// applied (it returns "" once nothing is lacking), checking again after
// each apply: at most wait, then *backend.BehindError naming what is
// lacking and the leader; or until ctx ends.
func (b *Backend) awaitApplies(ctx context.Context, wait time.Duration, lacking func() string) error {
	return awaitAppliesOn(ctx, b.applied, wait, b.LeaderAPIAddress, lacking)
}

// awaitAppliesOn is awaitApplies on the state machine whose applies
// signal wakes; leader names the leader for the *backend.BehindError.
func awaitAppliesOn(ctx context.Context, signal *appliedSignal, wait time.Duration, leader func() (string, string), lacking func() string) error {
	var deadline <-chan time.Time
	for {
		// Taken before the check, so an apply in between wakes the wait.
		applied := signal.wait()
		what := lacking()
		if what == "" {
			return nil
		}
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-applied:
		case <-deadline:
			addr, _ := leader()
			return &backend.BehindError{What: what, LeaderAddress: addr}
		case <-ctx.Done():
			return fmt.Errorf("wait to apply %s: %w", what, ctx.Err())
		}
	}
}

// ReadIndex returns, on the leader, an index that covers every write
// acknowledged before the call: hashicorp/raft has no ReadIndex, but a
// leader that confirms it still leads (a heartbeat round to a quorum,
// VerifyLeader) and has applied its term's barrier (metaReady) knows that
// its commit index covers every entry committed so far. A reader that
// then waits to apply it reads linearizably. Elsewhere ErrNotLeader.
func (b *Backend) ReadIndex() (uint64, error) {
	if !b.IsLeader() || !b.metaReady() {
		return 0, backend.ErrNotLeader
	}
	// Raft answers the future within a heartbeat round, or on losing
	// leadership or shutting down.
	switch err := b.raft.VerifyLeader().Error(); err {
	case nil:
	case raft.ErrNotLeader, raft.ErrLeadershipLost:
		return 0, backend.ErrNotLeader
	case raft.ErrRaftShutdown:
		return 0, backend.ErrShutdown
	default:
		return 0, fmt.Errorf("verify leadership: %w", err)
	}
	return max(b.raft.CommitIndex(), b.fsm.AppliedIndex()), nil
}
