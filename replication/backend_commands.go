package replication

import (
	"context"
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
)

// The backend's writes that the Node proposes as state machine commands:
// each converts the front end's request into its command (convert.go).

// Append appends whole record batches as they are, one per partition of
// one topic, in one Raft entry. Batches are validated first, so an
// invalid one is refused before it reaches Raft; a snappy, lz4 or zstd
// batch is refused with a *backend.FeatureLevelError until every member
// reads them (CheckCompression); on a compacted topic a record without a
// key is backend.ErrKeyRequired (checkKeys). Any refusal appends nothing
// of a.
func (b *Backend) Append(ctx context.Context, a backend.Append) ([]int64, error) {
	var checked appendChecks
	if a.Verified {
		checked = checkedCRC
	}
	offs, err := b.prod.appendBatches(ctx, appendIn(a), checked)
	return offs, fromStorage(err)
}

// JoinGroup adds a member to a consumer group (Node.JoinGroup).
func (b *Backend) JoinGroup(ctx context.Context, c backend.GroupJoin) (group.Assignment, error) {
	return b.joinGroup(ctx, fsm.GroupJoin(c))
}

// GroupHeartbeat keeps a member alive (Node.GroupHeartbeat).
func (b *Backend) GroupHeartbeat(ctx context.Context, c backend.GroupHeartbeat) (group.Assignment, error) {
	return b.groupHeartbeat(ctx, fsm.GroupHeartbeat(c))
}

// LeaveGroup removes a member (Node.LeaveGroup).
func (b *Backend) LeaveGroup(ctx context.Context, c backend.GroupLeave) error {
	return b.leaveGroup(ctx, fsm.GroupLeave(c))
}

// CommitGroupOffsets commits a member's offsets (Node.CommitGroupOffsets).
func (b *Backend) CommitGroupOffsets(ctx context.Context, c backend.GroupCommit) error {
	return b.commitGroupOffsets(ctx, fsm.GroupCommit{Group: c.Group, Member: c.Member, Generation: c.Generation, Offsets: c.Offsets})
}

// ResetGroupOffsets sets a group's offsets (Node.ResetGroupOffsets).
func (b *Backend) ResetGroupOffsets(ctx context.Context, c backend.GroupResetOffsets) error {
	return b.resetGroupOffsets(ctx, fsm.GroupResetOffsets{Group: c.Group, Offsets: c.Offsets})
}

// AutoResetGroupOffset moves a member's offset under its reset policy
// (Node.AutoResetGroupOffset).
func (b *Backend) AutoResetGroupOffset(ctx context.Context, c backend.GroupAutoReset) (int64, error) {
	return b.autoResetGroupOffset(ctx, fsm.GroupAutoReset{Group: c.Group, Member: c.Member, Generation: c.Generation, Partition: c.Partition, From: c.From, To: c.To})
}

// SetGroupOffsets commits or removes offsets of a group coordinated
// outside the state machine (Node.SetGroupOffsets).
func (b *Backend) SetGroupOffsets(ctx context.Context, c backend.GroupSetOffsets) error {
	return b.setGroupOffsets(ctx, fsm.GroupSetOffsets{Group: c.Group, Fence: c.Fence, Offsets: c.Offsets})
}

// CreateQueueGroup creates a queue group (Node.CreateQueueGroup).
func (b *Backend) CreateQueueGroup(ctx context.Context, c backend.QueueCreate) (queue.Config, error) {
	return b.createQueueGroup(ctx, fsm.QueueCreate{Topic: c.Topic, Group: c.Group, Config: c.Config, FromEnd: c.FromEnd})
}

// QueueAck acknowledges deliveries (Node.QueueAck).
func (b *Backend) QueueAck(ctx context.Context, c backend.QueueAck) (backend.QueueTokensResult, error) {
	return b.queueAck(ctx, fsm.QueueAck(c))
}

// QueueNack fails deliveries (Node.QueueNack).
func (b *Backend) QueueNack(ctx context.Context, c backend.QueueNack) (backend.QueueTokensResult, error) {
	return b.queueNack(ctx, fsm.QueueNack(c))
}

// QueueExtend extends leases (Node.QueueExtend).
func (b *Backend) QueueExtend(ctx context.Context, c backend.QueueExtend) (backend.QueueTokensResult, error) {
	return b.queueExtend(ctx, fsm.QueueExtend(c))
}

// StartRedrive starts a redrive job (redrive.Runner.Start): the leader
// runs it from its next batch.
func (b *Backend) StartRedrive(ctx context.Context, s backend.RedriveSpec) (backend.RedriveJob, error) {
	if _, err := b.placedQueue(s.DeadLetterTopic); err != nil {
		return backend.RedriveJob{}, err
	}
	j, err := b.redrive.Start(ctx, redriveSpecIn(s))
	if err != nil {
		return backend.RedriveJob{}, err
	}
	return redriveJobOut(j), nil
}

// StopRedrive stops a running job (redrive.Runner.Stop).
func (b *Backend) StopRedrive(ctx context.Context, id string) (backend.RedriveJob, error) {
	j, err := b.redrive.Stop(ctx, id)
	if err != nil {
		return backend.RedriveJob{}, err
	}
	return redriveJobOut(j), nil
}

// RedriveJob returns a job, or backend.ErrUnknownRedrive.
func (b *Backend) RedriveJob(id string) (backend.RedriveJob, error) {
	j, err := b.fsm.RedriveJob(id)
	if err != nil {
		return backend.RedriveJob{}, err
	}
	return redriveJobOut(j), nil
}

// RedriveJobs returns every job kept.
func (b *Backend) RedriveJobs() []backend.RedriveJob {
	js := b.fsm.RedriveJobs()
	out := make([]backend.RedriveJob, len(js))
	for i, j := range js {
		out[i] = redriveJobOut(j)
	}
	return out
}

// RedrivePosition is a job's position, per dead-letter partition.
func (b *Backend) RedrivePosition(j backend.RedriveJob) []int64 {
	return b.redrive.Position(fsm.RedriveJob{ID: j.ID, Spec: redriveSpecIn(j.Spec)})
}

// InitProducerID hands out a new Kafka producer id, epoch 0
// (fsm.ProducerInit): Kafka hands an idempotent producer a new id at every
// InitProducerId.
func (b *Backend) InitProducerID(ctx context.Context) (int64, int16, error) {
	data, err := fsm.EncodeProducerInit(b.cfg.Now().UnixNano())
	if err != nil {
		return 0, 0, err
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return 0, 0, err
	}
	r, ok := res.(fsm.ProducerInitResult)
	if !ok {
		return 0, 0, fmt.Errorf("init producer id: unexpected result %T", res)
	}
	return r.ID, r.Epoch, nil
}
