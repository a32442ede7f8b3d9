package replication

import (
	"context"
	"slices"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// QueueClaimWaitParts is QueueClaimWait from the data groups that hold
// partitions parts of a topic placed over data groups, so that a claim
// for a Kafka share session, which fetches the partitions one node leads,
// takes no record of the groups other nodes lead. It may still return
// records of other partitions of those groups. On a topic of the meta
// group, or with no partition of the topic named, it is QueueClaimWait.
func (b *Backend) QueueClaimWaitParts(ctx context.Context, c backend.QueueClaim, parts []int32, wait time.Duration, admit func(context.Context) error) (backend.QueueClaimResult, error) {
	deadline := time.Now().Add(wait)
	t, err := b.fsm.Topic(c.Topic)
	if err != nil || t.Placement == nil {
		return b.QueueClaimWait(ctx, c, wait, admit)
	}
	var groups []uint64
	for _, p := range parts {
		if p >= 0 && int(p) < len(t.Placement) && !slices.Contains(groups, t.Placement[p]) {
			groups = append(groups, t.Placement[p])
		}
	}
	if len(groups) == 0 {
		return b.QueueClaimWait(ctx, c, wait, admit)
	}
	if err := b.CheckPlacedGroups(); err != nil {
		return backend.QueueClaimResult{}, err
	}
	if err := b.checkClaim(fsm.QueueClaim(c)); err != nil {
		return backend.QueueClaimResult{}, err
	}
	return b.waitPlacedClaim(ctx, groups, c, deadline, admit)
}
