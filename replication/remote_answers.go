package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/membudget"
	"github.com/logd-dev/logd/replication/transport"
)

// Reads this node serves to other nodes over the Raft port (a partition
// of a data group read for a node that holds no caught-up replica, or at
// the group's leader for a consistent read) are answers too: they are
// charged to the node's answer memory budget, the one the Connect API
// and the Kafka listener share (docs/architecture.md, "Memory budgets"),
// keyed by the asking node, from before the read until the answer was
// written to the caller. A read that does not fit within remoteAnswerWait
// is answered overloaded (the caller's client gets OVERLOADED with a
// retry-after). Without a budget (SetAnswerBudget not called, as in
// tests) nothing is charged.

// remoteAnswerWait bounds how long a read served to another node waits
// for room in the budget.
const remoteAnswerWait = 500 * time.Millisecond

// remoteAnswerCopies is how many copies of a read's batches its answer
// holds at once: the batches, their base64 in the JSON answer, the
// answer's bytes.
const remoteAnswerCopies = 3

// SetAnswerBudget makes reads served to other nodes charge b (the
// server's answer budget, server.Server.AnswerBudget).
func (n *Node) SetAnswerBudget(b *membudget.Budget) { n.answers.Store(b) }

// chargeRemoteAnswer charges a read of at most maxBytes served to node
// peer; its charge is released once the answer was written (or at once
// when ctx is not a call's). A nil charge (no budget) needs nothing.
func (n *Node) chargeRemoteAnswer(ctx context.Context, peer string, maxBytes int) (*membudget.Charge, error) {
	b := n.answers.Load()
	if b == nil {
		return nil, nil
	}
	c, err := b.Acquire(ctx, "node:"+peer, remoteAnswerCopies*int64(maxBytes), remoteAnswerWait)
	if err != nil {
		return nil, fmt.Errorf("%w: the answer memory budget is full: %v", backend.ErrOverloaded, err)
	}
	if !transport.AfterAnswer(ctx, c.Release) {
		// Not a call: the caller holds the answer as its own.
		c.Release()
		return nil, nil
	}
	return c, nil
}
