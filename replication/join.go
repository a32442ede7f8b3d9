package replication

import (
	"github.com/logd-dev/logd/replication/fsm"

	"context"
	"fmt"
	"log/slog"
	"time"
)

// AskJoin makes one attempt to join a cluster: it asks the member whose
// client API is at member to add the node req describes, and returns the id
// of the leader that added it. The member forwards the call to the leader,
// which answers once the node has caught up and is a voter (Join), so one
// attempt may last as long as the catch-up. The front end implements it over
// the client API, as it implements SegmentSource; this package does not
// speak the client API.
type AskJoin func(ctx context.Context, member string, req JoinRequest) (leaderID string, err error)

const (
	// joinAttemptTimeout bounds one attempt, catch-up included: a node that
	// needs a snapshot and every segment copied may take minutes.
	joinAttemptTimeout = 10 * time.Minute
	// joinRetryInterval is the pause after a failed attempt.
	joinRetryInterval = time.Second
)

// JoinCluster asks the cluster member whose client API is at member to add
// this node, through ask, and retries until an attempt succeeds or ctx ends;
// it returns the leader's id, or ctx's error. A node opened without
// Bootstrap and without Raft state runs it once serving. Joining again is
// harmless: a voter at the same address is only re-registered, so a restart
// with a new API address updates it.
func (n *Node) JoinCluster(ctx context.Context, member string, ask AskJoin) (string, error) {
	req := JoinRequest{ID: n.cfg.NodeID, RaftAddress: n.cfg.RaftAdvertise, APIAddress: n.cfg.APIAdvertise, FeatureLevel: fsm.Level}
	return joinLoop(ctx, n.cfg.Logger, member, req, ask, joinAttemptTimeout, joinRetryInterval)
}

// joinLoop is JoinCluster with its timings as arguments.
func joinLoop(ctx context.Context, logger *slog.Logger, member string, req JoinRequest, ask AskJoin, attemptTimeout, retry time.Duration) (string, error) {
	if member == "" || ask == nil {
		return "", fmt.Errorf("%w: joining needs a member's address and a way to ask it", ErrInvalidArgument)
	}
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		leader, err := ask(actx, member, req)
		cancel()
		if err == nil {
			logger.Info("joined the cluster", "via", member, "leader", leader)
			return leader, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("join via %s: %w", member, ctx.Err())
		}
		logger.Warn("join failed; retrying", "via", member, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("join via %s: %w", member, ctx.Err())
		case <-time.After(retry):
		}
	}
}
