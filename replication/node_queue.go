package replication

import (
	"context"
	"crypto/rand"
	"errors"
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

func (b *Backend) proposeQueue(ctx context.Context, t fsm.CommandType, c any) (any, error) {
	data, err := fsm.EncodeQueue(t, b.cfg.Now().UnixNano(), c)
	if err != nil {
		return nil, err
	}
	return b.propose(ctx, data)
}

// createQueueGroup proposes a new queue group and returns its settings
// with defaults applied. The leader picks the group's secret.
func (b *Backend) createQueueGroup(ctx context.Context, c fsm.QueueCreate) (queue.Config, error) {
	groups, err := b.placedQueue(c.Topic)
	if err != nil {
		return queue.Config{}, err
	}
	t, err := b.fsm.Topic(c.Topic)
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
	if groups != nil {
		return b.createPlacedQueue(ctx, t, groups, c)
	}
	res, err := b.proposeQueue(ctx, fsm.CmdQueueCreate, c)
	if err != nil {
		return queue.Config{}, err
	}
	cfg, _ := res.(queue.Config)
	return cfg, nil
}

// AlterQueueGroup applies change to the group's current settings (on this
// leader's state) and proposes the result.
func (b *Backend) AlterQueueGroup(ctx context.Context, topic, name string, change func(*queue.Config)) (queue.Config, error) {
	info, err := b.fsm.DescribeQueueGroup(topic, name, b.fsm.Now())
	if err != nil {
		return queue.Config{}, err
	}
	cfg := info.Config
	change(&cfg)
	if err := cfg.WithDefaults(topic, name).Validate(); err != nil {
		return queue.Config{}, err
	}
	groups, err := b.placedQueue(topic)
	if err != nil {
		return queue.Config{}, err
	}
	res, err := b.proposeQueue(ctx, fsm.CmdQueueAlter, fsm.QueueAlter{Topic: topic, Group: name, Config: cfg})
	if err != nil {
		return queue.Config{}, err
	}
	out, _ := res.(queue.Config)
	if groups != nil {
		// The meta group's copy decided; each data group's takes it.
		data, err := fsm.EncodeQueue(fsm.CmdQueueAlter, b.cfg.Now().UnixNano(), fsm.QueueAlter{Topic: topic, Group: name, Config: out})
		if err != nil {
			return queue.Config{}, err
		}
		if err := queueEverywhere(ctx, b, groups, data, false); err != nil {
			return queue.Config{}, fmt.Errorf("queue group %s/%s changed in the meta group, not yet in every data group (try again): %w", topic, name, err)
		}
	}
	return out, nil
}

// queueClaim proposes a claim and returns the delivered records once the
// claim is committed (fsynced by a quorum) and applied.
func (b *Backend) queueClaim(ctx context.Context, c fsm.QueueClaim) (backend.QueueClaimResult, error) {
	if err := b.checkClaim(c); err != nil {
		return backend.QueueClaimResult{}, err
	}
	level, err := b.featureLevel()
	if err != nil {
		return backend.QueueClaimResult{}, err
	}
	groups, err := b.placedQueue(c.Topic)
	if err != nil {
		return backend.QueueClaimResult{}, err
	}
	if groups != nil {
		res, _, err := b.claimPlaced(ctx, groups, c, level)
		return res, err
	}
	// From fsm.QueueLevel on, every claim carries the worker id (empty or
	// not), so the first claim after an upgrade raises the applied level.
	res, err := b.propose(ctx, fsm.EncodeQueueClaim(b.cfg.Now().UnixNano(), c, level))
	if err != nil {
		return backend.QueueClaimResult{}, err
	}
	r, ok := res.(backend.QueueClaimResult)
	if !ok {
		return backend.QueueClaimResult{}, fmt.Errorf("claim: unexpected result %T", res)
	}
	return r, nil
}

// checkClaim refuses a claim outside its bounds, or on a queue group
// that does not exist.
func (b *Backend) checkClaim(c fsm.QueueClaim) error {
	switch {
	case c.Max < 1 || c.Max > backend.MaxQueueClaim:
		return fmt.Errorf("%w: max records %d outside [1, %d]", queue.ErrInvalidRequest, c.Max, backend.MaxQueueClaim)
	case c.MaxBytes < 0:
		return fmt.Errorf("%w: max bytes %d is negative", queue.ErrInvalidRequest, c.MaxBytes)
	case c.Lease < 0 || c.Lease > queue.MaxLease:
		return fmt.Errorf("%w: lease %v outside [0, %v]", queue.ErrInvalidRequest, c.Lease, queue.MaxLease)
	case len(c.Worker) > queue.MaxWorkerLen:
		return fmt.Errorf("%w: worker id of %d bytes, at most %d", queue.ErrInvalidRequest, len(c.Worker), queue.MaxWorkerLen)
	}
	_, _, err := b.fsm.QueueClaimable(c.Topic, c.Group, 0)
	return err
}

func (b *Backend) checkTokens(topic, name string, count int) error {
	if count == 0 || count > backend.MaxQueueTokens {
		return fmt.Errorf("%w: %d tokens; want 1 to %d", queue.ErrInvalidRequest, count, backend.MaxQueueTokens)
	}
	_, _, err := b.fsm.QueueClaimable(topic, name, 0)
	return err
}

func tokensResult(res any) (backend.QueueTokensResult, error) {
	r, ok := res.(backend.QueueTokensResult)
	if !ok {
		return backend.QueueTokensResult{}, fmt.Errorf("unexpected result %T", res)
	}
	return r, nil
}

// queueAck proposes acknowledgements; each token gets its own result.
func (b *Backend) queueAck(ctx context.Context, c fsm.QueueAck) (backend.QueueTokensResult, error) {
	if err := b.checkTokens(c.Topic, c.Group, len(c.Tokens)); err != nil {
		return backend.QueueTokensResult{}, err
	}
	if groups, err := b.placedQueue(c.Topic); err != nil || groups != nil {
		if err != nil {
			return backend.QueueTokensResult{}, err
		}
		return b.tokensPlaced(ctx, c.Topic, fsm.TokenPartitions(c.Tokens), func(now int64, at []int) ([]byte, error) {
			return fsm.EncodeQueue(fsm.CmdQueueAck, now, fsm.QueueAck{Topic: c.Topic, Group: c.Group, Tokens: pick(c.Tokens, at)})
		})
	}
	res, err := b.proposeQueue(ctx, fsm.CmdQueueAck, c)
	if err != nil {
		return backend.QueueTokensResult{}, err
	}
	return tokensResult(res)
}

// queueNack proposes negative acknowledgements.
func (b *Backend) queueNack(ctx context.Context, c fsm.QueueNack) (backend.QueueTokensResult, error) {
	if err := b.checkTokens(c.Topic, c.Group, len(c.Nacks)); err != nil {
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
	if groups, err := b.placedQueue(c.Topic); err != nil || groups != nil {
		if err != nil {
			return backend.QueueTokensResult{}, err
		}
		parts := make([]int32, len(c.Nacks))
		for i, nk := range c.Nacks {
			parts[i] = nk.Token.Partition
		}
		return b.tokensPlaced(ctx, c.Topic, parts, func(now int64, at []int) ([]byte, error) {
			return fsm.EncodeQueue(fsm.CmdQueueNack, now, fsm.QueueNack{Topic: c.Topic, Group: c.Group, Nacks: pick(c.Nacks, at)})
		})
	}
	res, err := b.proposeQueue(ctx, fsm.CmdQueueNack, c)
	if err != nil {
		return backend.QueueTokensResult{}, err
	}
	return tokensResult(res)
}

// queueExtend proposes lease extensions.
func (b *Backend) queueExtend(ctx context.Context, c fsm.QueueExtend) (backend.QueueTokensResult, error) {
	if err := b.checkTokens(c.Topic, c.Group, len(c.Tokens)); err != nil {
		return backend.QueueTokensResult{}, err
	}
	if c.Lease < 0 || c.Lease > queue.MaxLease {
		return backend.QueueTokensResult{}, fmt.Errorf("%w: lease %v outside [0, %v]", queue.ErrInvalidRequest, c.Lease, queue.MaxLease)
	}
	if groups, err := b.placedQueue(c.Topic); err != nil || groups != nil {
		if err != nil {
			return backend.QueueTokensResult{}, err
		}
		return b.tokensPlaced(ctx, c.Topic, fsm.TokenPartitions(c.Tokens), func(now int64, at []int) ([]byte, error) {
			ext := c
			ext.Tokens = pick(c.Tokens, at)
			return fsm.EncodeQueue(fsm.CmdQueueExtend, now, ext)
		})
	}
	res, err := b.proposeQueue(ctx, fsm.CmdQueueExtend, c)
	if err != nil {
		return backend.QueueTokensResult{}, err
	}
	return tokensResult(res)
}

// ReleaseQueueWorker ends the live leases of a queue group whose claims
// named worker, offering their records again at once, once every
// member's build applies it (fsm.QueueReleaseLevel: propose answers a
// *backend.FeatureLevelError before).
func (b *Backend) ReleaseQueueWorker(ctx context.Context, topic, name, worker, why string) (backend.QueueReleaseResult, error) {
	if worker == "" || len(worker) > queue.MaxWorkerLen {
		return backend.QueueReleaseResult{}, fmt.Errorf("%w: worker id of %d bytes, want 1 to %d", queue.ErrInvalidRequest, len(worker), queue.MaxWorkerLen)
	}
	if _, _, err := b.fsm.QueueClaimable(topic, name, 0); err != nil {
		return backend.QueueReleaseResult{}, err
	}
	data, err := fsm.EncodeJSON(fsm.CmdQueueRelease, b.cfg.Now().UnixNano(), fsm.QueueRelease{Topic: topic, Group: name, Worker: worker, Why: why})
	if err != nil {
		return backend.QueueReleaseResult{}, err
	}
	if groups, err := b.placedQueue(topic); err != nil || groups != nil {
		if err != nil {
			return backend.QueueReleaseResult{}, err
		}
		parts := make([]backend.QueueReleaseResult, len(groups))
		errs := inParallel(len(groups), func(i int) error {
			var err error
			parts[i], err = queueIn[backend.QueueReleaseResult](ctx, b, groups[i], data)
			return err
		})
		var out backend.QueueReleaseResult
		for _, p := range parts {
			out.Released += p.Released
			out.DeadLettered += p.DeadLettered
		}
		return out, errors.Join(errs...)
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return backend.QueueReleaseResult{}, err
	}
	r, ok := res.(backend.QueueReleaseResult)
	if !ok {
		return backend.QueueReleaseResult{}, fmt.Errorf("queue release: unexpected result %T", res)
	}
	return r, nil
}

// SetQueueStarts moves the start offsets of partitions of a queue group
// (fsm.QueueSetStarts) and waits until that is committed and applied,
// once every member's build applies it (fsm.QueueStartsLevel).
func (b *Backend) SetQueueStarts(ctx context.Context, topic, name string, starts []queue.PartitionStart) error {
	if len(starts) == 0 {
		return nil
	}
	if _, _, err := b.fsm.QueueClaimable(topic, name, 0); err != nil {
		return err
	}
	groups, err := b.placedQueue(topic)
	if err != nil {
		return err
	}
	if groups != nil {
		return b.setStartsPlaced(ctx, topic, name, starts)
	}
	return b.proposeQueueAdmin(ctx, fsm.CmdQueueSetStarts, fsm.QueueSetStarts{Topic: topic, Group: name, Starts: starts})
}

// DeleteQueueGroup deletes a queue group (fsm.QueueDelete) and waits
// until that is committed and applied, once every member's build applies
// it (fsm.QueueStartsLevel).
func (b *Backend) DeleteQueueGroup(ctx context.Context, topic, name string) error {
	if _, _, err := b.fsm.QueueClaimable(topic, name, 0); err != nil {
		return err
	}
	groups, err := b.placedQueue(topic)
	if err != nil {
		return err
	}
	if groups != nil {
		// The data groups' copies first: while the meta group's stays,
		// the group exists, and a failed deletion can be tried again.
		if err := b.CheckQueueStarts(); err != nil {
			return err
		}
		data, err := fsm.EncodeJSON(fsm.CmdQueueDelete, b.cfg.Now().UnixNano(), fsm.QueueDelete{Topic: topic, Group: name})
		if err != nil {
			return err
		}
		if err := queueEverywhere(ctx, b, groups, data, true); err != nil {
			return err
		}
	}
	return b.proposeQueueAdmin(ctx, fsm.CmdQueueDelete, fsm.QueueDelete{Topic: topic, Group: name})
}

// proposeQueueAdmin proposes a JSON queue command whose result is nil or
// an error.
func (b *Backend) proposeQueueAdmin(ctx context.Context, ct fsm.CommandType, body any) error {
	data, err := fsm.EncodeJSON(ct, b.cfg.Now().UnixNano(), body)
	if err != nil {
		return err
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return err
	}
	if res != nil {
		return fmt.Errorf("%v: unexpected result %T", ct, res)
	}
	return nil
}

// PauseQueueGroup pauses or resumes a queue group and waits until that is
// committed and applied.
func (b *Backend) PauseQueueGroup(ctx context.Context, topic, name string, paused bool) (backend.QueuePauseResult, error) {
	if _, _, err := b.fsm.QueueClaimable(topic, name, 0); err != nil {
		return backend.QueuePauseResult{}, err
	}
	groups, err := b.placedQueue(topic)
	if err != nil {
		return backend.QueuePauseResult{}, err
	}
	data, err := fsm.EncodeJSON(fsm.CmdQueuePause, b.cfg.Now().UnixNano(), fsm.QueuePause{Topic: topic, Group: name, Paused: paused})
	if err != nil {
		return backend.QueuePauseResult{}, err
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return backend.QueuePauseResult{}, err
	}
	r, ok := res.(backend.QueuePauseResult)
	if !ok {
		return backend.QueuePauseResult{}, fmt.Errorf("queue pause: unexpected result %T", res)
	}
	if groups != nil {
		// The meta group's copy decided (a claim asks it first); each
		// data group's takes it.
		if err := queueEverywhere(ctx, b, groups, data, false); err != nil {
			return backend.QueuePauseResult{}, fmt.Errorf("queue group %s/%s paused in the meta group, not yet in every data group (try again): %w", topic, name, err)
		}
	}
	return r, nil
}

// Now returns the node's clock as used to stamp commands.
func (n *Node) Now() time.Time { return n.cfg.Now() }
