package replication

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
)

// Bounds on one queue call, so a command stays small and its Apply short.
const (
	// MaxQueueErrorBytes bounds a nack's error text.
	MaxQueueErrorBytes = 4096
)

func (n *Node) proposeQueue(ctx context.Context, t fsm.CommandType, c any) (any, error) {
	data, err := fsm.EncodeQueue(t, n.cfg.Now().UnixNano(), c)
	if err != nil {
		return nil, err
	}
	return n.propose(ctx, data)
}

// CreateQueueGroup proposes a new queue group and returns its settings
// with defaults applied. The leader picks the group's secret.
func (n *Node) CreateQueueGroup(ctx context.Context, c fsm.QueueCreate) (queue.Config, error) {
	t, err := n.fsm.Topic(c.Topic)
	if err != nil {
		return queue.Config{}, err
	}
	if err := fsm.ValidateQueueCreate(t, c); err != nil {
		return queue.Config{}, err
	}
	c.Secret = make([]byte, 16)
	if _, err := rand.Read(c.Secret); err != nil {
		return queue.Config{}, fmt.Errorf("queue group secret: %w", err)
	}
	res, err := n.proposeQueue(ctx, fsm.CmdQueueCreate, c)
	if err != nil {
		return queue.Config{}, err
	}
	cfg, _ := res.(queue.Config)
	return cfg, nil
}

// AlterQueueGroup applies change to the group's current settings (on this
// leader's state) and proposes the result.
func (n *Node) AlterQueueGroup(ctx context.Context, topic, name string, change func(*queue.Config)) (queue.Config, error) {
	info, err := n.fsm.DescribeQueueGroup(topic, name, n.fsm.Now())
	if err != nil {
		return queue.Config{}, err
	}
	cfg := info.Config
	change(&cfg)
	if err := cfg.WithDefaults(topic, name).Validate(); err != nil {
		return queue.Config{}, err
	}
	res, err := n.proposeQueue(ctx, fsm.CmdQueueAlter, fsm.QueueAlter{Topic: topic, Group: name, Config: cfg})
	if err != nil {
		return queue.Config{}, err
	}
	out, _ := res.(queue.Config)
	return out, nil
}

// QueueClaim proposes a claim and returns the delivered records once the
// claim is committed (fsynced by a quorum) and applied.
func (n *Node) QueueClaim(ctx context.Context, c fsm.QueueClaim) (backend.QueueClaimResult, error) {
	switch {
	case c.Max < 1 || c.Max > backend.MaxQueueClaim:
		return backend.QueueClaimResult{}, fmt.Errorf("%w: max records %d outside [1, %d]", queue.ErrInvalidRequest, c.Max, backend.MaxQueueClaim)
	case c.MaxBytes < 0:
		return backend.QueueClaimResult{}, fmt.Errorf("%w: max bytes %d is negative", queue.ErrInvalidRequest, c.MaxBytes)
	case c.Lease < 0 || c.Lease > queue.MaxLease:
		return backend.QueueClaimResult{}, fmt.Errorf("%w: lease %v outside [0, %v]", queue.ErrInvalidRequest, c.Lease, queue.MaxLease)
	}
	if _, _, err := n.fsm.QueueClaimable(c.Topic, c.Group, 0); err != nil {
		return backend.QueueClaimResult{}, err
	}
	if len(c.Worker) > queue.MaxWorkerLen {
		return backend.QueueClaimResult{}, fmt.Errorf("%w: worker id of %d bytes, at most %d", queue.ErrInvalidRequest, len(c.Worker), queue.MaxWorkerLen)
	}
	level, err := n.featureLevel()
	if err != nil {
		return backend.QueueClaimResult{}, err
	}
	// From fsm.QueueLevel on, every claim carries the worker id (empty or
	// not), so the first claim after an upgrade raises the applied level.
	res, err := n.propose(ctx, fsm.EncodeQueueClaim(n.cfg.Now().UnixNano(), c, level))
	if err != nil {
		return backend.QueueClaimResult{}, err
	}
	r, ok := res.(backend.QueueClaimResult)
	if !ok {
		return backend.QueueClaimResult{}, fmt.Errorf("claim: unexpected result %T", res)
	}
	return r, nil
}

func (n *Node) checkTokens(topic, name string, count int) error {
	if count == 0 || count > backend.MaxQueueTokens {
		return fmt.Errorf("%w: %d tokens; want 1 to %d", queue.ErrInvalidRequest, count, backend.MaxQueueTokens)
	}
	_, _, err := n.fsm.QueueClaimable(topic, name, 0)
	return err
}

func tokensResult(res any) (backend.QueueTokensResult, error) {
	r, ok := res.(backend.QueueTokensResult)
	if !ok {
		return backend.QueueTokensResult{}, fmt.Errorf("unexpected result %T", res)
	}
	return r, nil
}

// QueueAck proposes acknowledgements; each token gets its own result.
func (n *Node) QueueAck(ctx context.Context, c fsm.QueueAck) (backend.QueueTokensResult, error) {
	if err := n.checkTokens(c.Topic, c.Group, len(c.Tokens)); err != nil {
		return backend.QueueTokensResult{}, err
	}
	res, err := n.proposeQueue(ctx, fsm.CmdQueueAck, c)
	if err != nil {
		return backend.QueueTokensResult{}, err
	}
	return tokensResult(res)
}

// QueueNack proposes negative acknowledgements.
func (n *Node) QueueNack(ctx context.Context, c fsm.QueueNack) (backend.QueueTokensResult, error) {
	if err := n.checkTokens(c.Topic, c.Group, len(c.Nacks)); err != nil {
		return backend.QueueTokensResult{}, err
	}
	for i, nk := range c.Nacks {
		if len(nk.Error) > MaxQueueErrorBytes {
			c.Nacks[i].Error = nk.Error[:MaxQueueErrorBytes]
		}
		if nk.HasDelay && (nk.Delay < 0 || nk.Delay > queue.MaxDelay) {
			return backend.QueueTokensResult{}, fmt.Errorf("%w: delay %v outside [0, %v]", queue.ErrInvalidRequest, nk.Delay, queue.MaxDelay)
		}
	}
	res, err := n.proposeQueue(ctx, fsm.CmdQueueNack, c)
	if err != nil {
		return backend.QueueTokensResult{}, err
	}
	return tokensResult(res)
}

// QueueExtend proposes lease extensions.
func (n *Node) QueueExtend(ctx context.Context, c fsm.QueueExtend) (backend.QueueTokensResult, error) {
	if err := n.checkTokens(c.Topic, c.Group, len(c.Tokens)); err != nil {
		return backend.QueueTokensResult{}, err
	}
	if c.Lease < 0 || c.Lease > queue.MaxLease {
		return backend.QueueTokensResult{}, fmt.Errorf("%w: lease %v outside [0, %v]", queue.ErrInvalidRequest, c.Lease, queue.MaxLease)
	}
	res, err := n.proposeQueue(ctx, fsm.CmdQueueExtend, c)
	if err != nil {
		return backend.QueueTokensResult{}, err
	}
	return tokensResult(res)
}

// PauseQueueGroup pauses or resumes a queue group and waits until that is
// committed and applied.
func (n *Node) PauseQueueGroup(ctx context.Context, topic, name string, paused bool) (backend.QueuePauseResult, error) {
	if _, _, err := n.fsm.QueueClaimable(topic, name, 0); err != nil {
		return backend.QueuePauseResult{}, err
	}
	data, err := fsm.EncodeJSON(fsm.CmdQueuePause, n.cfg.Now().UnixNano(), fsm.QueuePause{Topic: topic, Group: name, Paused: paused})
	if err != nil {
		return backend.QueuePauseResult{}, err
	}
	res, err := n.propose(ctx, data)
	if err != nil {
		return backend.QueuePauseResult{}, err
	}
	r, ok := res.(backend.QueuePauseResult)
	if !ok {
		return backend.QueuePauseResult{}, fmt.Errorf("queue pause: unexpected result %T", res)
	}
	return r, nil
}

// Now returns the node's clock as used to stamp commands.
func (n *Node) Now() time.Time { return n.cfg.Now() }
