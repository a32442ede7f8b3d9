package replication

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
)

// Backend is the facade of the cluster as the front ends see it: it
// implements the interfaces of package backend (backend.API for the
// Connect API, backend.Kafka for the Kafka listener) in that package's
// values, so that no front end holds a *log.Log, a *fsm.Topic or anything
// of Raft: reads are copies, writes are the state machine's commands,
// built here from the front ends' requests (convert.go,
// backend_commands.go) and proposed through the Node.
//
// Backend adds to the Node what a front end would otherwise do itself:
// the commands (topics, appends, consumer and queue groups), produce
// routing and batch building (produce.go), reads of stored bytes with
// their long-poll channel (reads.go), the claim long poll (claim_wait.go)
// and the segment endpoint peers fetch from (catchup.go). It starts
// nothing; closing the Node ends it.
//
// Methods may be called from any goroutine.
type Backend struct {
	*Node
	// prod is the produce path, with the round-robin counters of keyless
	// records (produce.go).
	prod producer
}

// NewBackend returns the backend over n.
func NewBackend(n *Node) *Backend {
	return &Backend{Node: n, prod: producer{n: n}}
}

func topicInfo(t *fsm.Topic) backend.TopicInfo {
	return backend.TopicInfo{Name: t.Name, Partitions: int32(len(t.Partitions)), Config: maps.Clone(t.Config), CreatedNanos: t.CreatedNanos,
		Placement: slices.Clone(t.Placement)}
}

// CreateTopic creates a topic through Raft and returns it as applied.
func (b *Backend) CreateTopic(ctx context.Context, c backend.CreateTopic) (backend.TopicInfo, error) {
	t, err := b.createTopic(ctx, createTopicIn(c))
	if err != nil {
		return backend.TopicInfo{}, err
	}
	return topicInfo(t), nil
}

// TopicQuota returns the quota this node writes into the topic creations
// it proposes (Config.Quota) and the cluster's counts of topics and
// partitions.
func (b *Backend) TopicQuota() (q backend.TopicQuota, topics, partitions int64) {
	topics, partitions = b.Node.fsm.TopicCounts()
	return b.Node.cfg.Quota, topics, partitions
}

// AlterTopic changes a topic's settings through Raft and returns them as
// applied.
func (b *Backend) AlterTopic(ctx context.Context, c backend.AlterTopic) (backend.TopicInfo, error) {
	t, err := b.alterTopic(ctx, fsm.AlterTopic(c))
	if err != nil {
		return backend.TopicInfo{}, err
	}
	return topicInfo(t), nil
}

// DeleteTopic deletes a topic and its files through Raft.
func (b *Backend) DeleteTopic(ctx context.Context, name string) error {
	if err := b.deleteTopic(ctx, name); err != nil {
		return err
	}
	b.prod.rr.forget(name)
	return nil
}

// Topic returns a topic as applied on this node, or backend.ErrUnknownTopic.
func (b *Backend) Topic(name string) (backend.TopicInfo, error) {
	t, err := b.FSM().Topic(name)
	if err != nil {
		return backend.TopicInfo{}, err
	}
	return topicInfo(t), nil
}

// Topics returns every topic applied on this node, sorted by name.
func (b *Backend) Topics() []backend.TopicInfo {
	ts := b.FSM().Topics()
	out := make([]backend.TopicInfo, len(ts))
	for i, t := range ts {
		out[i] = topicInfo(t)
	}
	return out
}

// DescribeTopic returns a topic with its partitions' state on this node.
// The bounds of a partition of a data group are Offsets' (this node's
// replica once it reached what reads and writes through this node saw,
// else a replica of the group): a client that wrote through this node
// and then asks where the partition ends, as logctl consume does before
// it reads, sees its write (docs/architecture.md, "Read guarantees").
func (b *Backend) DescribeTopic(name string) (backend.TopicState, error) {
	t, err := b.FSM().Topic(name)
	if err != nil {
		return backend.TopicState{}, err
	}
	st := b.topicState(t)
	if t.Placement != nil {
		bounds := make([]backend.Offsets, len(st.Partitions))
		errs := inParallel(len(st.Partitions), func(i int) (err error) {
			bounds[i], err = b.Offsets(name, int32(i))
			return err
		})
		for i, err := range errs {
			if err == nil {
				st.Partitions[i].LogStartOffset, st.Partitions[i].EndOffset = bounds[i].LogStart, bounds[i].End
			}
		}
	}
	return st, nil
}

// TopicStates returns DescribeTopic of every topic, sorted by name.
func (b *Backend) TopicStates() []backend.TopicState {
	ts := b.FSM().Topics()
	out := make([]backend.TopicState, len(ts))
	for i, t := range ts {
		out[i] = b.topicState(t)
	}
	return out
}

func (b *Backend) topicState(t *fsm.Topic) backend.TopicState {
	ds := t.Dedup().Stats()
	st := backend.TopicState{Topic: topicInfo(t), Partitions: make([]backend.PartitionState, len(t.Partitions)),
		Idempotency: backend.IdempotencyStats{Keys: int64(ds.Keys), Evicted: int64(ds.Evicted), Expired: int64(ds.Expired)}}
	for i := range t.Partitions {
		// A partition of a data group is read from this node's replica
		// of the group; one this node holds no replica of shows as
		// empty.
		group, leader := b.partitionLeader(t, int32(i))
		p, err := b.hostedPartition(t, int32(i))
		if err != nil {
			st.Partitions[i] = backend.PartitionState{Partition: int32(i), Group: group, Leader: leader}
			continue
		}
		l := p.Log()
		segs := l.Segments()
		ps := backend.PartitionState{Partition: p.Index, LogStartOffset: l.StartOffset(), EndOffset: l.EndOffset(), Bytes: l.Size(), Segments: int32(len(segs))}
		for _, s := range segs {
			if s.Compacted {
				ps.CompactedSegments++
			}
		}
		// The run is recorded by the state machine that holds the
		// partition: the meta group's, or its data group's.
		if f, err := b.partitionFSM(t.Name, int32(i)); err == nil {
			if r, ok := f.LastCleanerRun(t.Name, t.CreateIndex, p.Index); ok {
				ps.LastCleanerRun = &r
			}
		}
		ps.Group, ps.Leader = group, leader
		st.Partitions[i] = ps
	}
	return st
}

// Offsets returns a partition's bounds on this node.
func (b *Backend) Offsets(topic string, partition int32) (backend.Offsets, error) {
	o, err := b.offsets(topic, partition)
	if err != nil && errors.Is(err, backend.ErrUnknownTopic) {
		if t, terr := b.fsm.Topic(topic); terr == nil && t.Placement != nil {
			// Placed, not adopted by the replica read yet: empty, unless
			// a read through this node answered more before (never go
			// back, read_floor.go).
			if floor := b.floors.get(topic, partition, t.CreateIndex); floor > 0 {
				return backend.Offsets{}, b.behindFloor(topic, partition, floor)
			}
			return backend.Offsets{}, nil
		}
	}
	return o, err
}

func (b *Backend) offsets(topic string, partition int32) (backend.Offsets, error) {
	f, err := b.partitionFSM(topic, partition)
	var pe *fsm.PartitionElsewhereError
	elsewhere := errors.As(err, &pe)
	if err != nil && !elsewhere {
		return backend.Offsets{}, err
	}
	bounds := func(f *fsm.FSM) (backend.ReadResult, error) {
		p, err := groupPartition(b.fsm, f, topic, partition)
		if err != nil {
			return backend.ReadResult{}, err
		}
		l := p.Log()
		return backend.ReadResult{LogStartOffset: l.StartOffset(), EndOffset: l.EndOffset(), Changed: p.Changed()}, nil
	}
	if f == b.fsm {
		r, err := bounds(f)
		return backend.Offsets{LogStart: r.LogStartOffset, End: r.EndOffset}, err
	}
	// A partition of a data group: as Read, never below what this node
	// answered before (read_floor.go).
	t, err := b.fsm.Topic(topic)
	if err != nil {
		return backend.Offsets{}, err
	}
	g := t.PartitionGroup(partition)
	var local func() (backend.ReadResult, error)
	if !elsewhere {
		local = func() (backend.ReadResult, error) { return bounds(f) }
	}
	r, err := b.readPlaced(topic, partition, t.CreateIndex, g, local, func(ctx context.Context, floor int64, leader bool) (backend.ReadResult, error) {
		return b.readRemoteFrom(ctx, g, readCall{Topic: topic, Partition: partition, Leader: leader}, floor)
	})
	return backend.Offsets{LogStart: r.LogStartOffset, End: r.EndOffset}, err
}

// OffsetForTime returns the first offset of a partition whose batch's max
// timestamp is at or after tsMillis (the end offset if none is), from the
// log's time index.
func (b *Backend) OffsetForTime(topic string, partition int32, tsMillis int64) (int64, error) {
	f, err := b.partitionFSM(topic, partition)
	var pe *fsm.PartitionElsewhereError
	if errors.As(err, &pe) && b.stores.port != nil {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ApplyTimeout)
		defer cancel()
		_, off, err := b.readRemoteCall(ctx, pe.Group, readCall{Topic: topic, Partition: partition, TimestampMs: &tsMillis})
		return off, err
	}
	if err != nil {
		return 0, err
	}
	p, err := groupPartition(b.fsm, f, topic, partition)
	if err != nil {
		return 0, err
	}
	off, err := p.Log().OffsetForTime(tsMillis)
	return off, fromStorage(err)
}

// Failed returns the error that stopped the state machine, or nil.
func (b *Backend) Failed() error { return b.FSM().Failed() }

// NodeAPIAddress returns the registered client API address of a node.
func (b *Backend) NodeAPIAddress(id string) (string, bool) { return b.FSM().NodeAddress(id) }

// NodeKafkaAddress returns the Kafka address a node registered; false
// when it registered none.
func (b *Backend) NodeKafkaAddress(id string) (string, bool) {
	n, ok := b.FSM().Node(id)
	return n.KafkaAddress, ok && n.KafkaAddress != ""
}

// MemberAPIAddresses returns the client API addresses of the registered
// nodes, sorted by node id.
func (b *Backend) MemberAPIAddresses() []string {
	nodes := b.FSM().Nodes()
	addrs := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.APIAddress != "" {
			addrs = append(addrs, n.APIAddress)
		}
	}
	return addrs
}

// CleanerCounters returns the totals of the retention commands this node
// applied, in the meta group and its data group replicas.
func (b *Backend) CleanerCounters() backend.CleanerCounters {
	var out backend.CleanerCounters
	for _, f := range b.stateMachines() {
		c := f.CleanerCounters()
		out.BytesDeleted += c.BytesDeleted
		out.RecordsCompacted += c.RecordsCompacted
		out.Trims += c.Trims
		out.Compactions += c.Compactions
	}
	return out
}

// DescribeQueueGroup describes a queue group at now (Unix ns; lazy expiry
// is counted, not applied).
//
// On a topic placed over data groups, the partitions' state is each data
// group's (queue_route.go).
func (b *Backend) DescribeQueueGroup(topic, name string, now int64) (backend.QueueGroupInfo, error) {
	if groups, err := b.placedQueue(topic); err == nil && groups != nil {
		return b.describePlaced(groups, topic, name, now)
	}
	return b.FSM().DescribeQueueGroup(topic, name, now)
}

// QueueGroups lists the names of a topic's queue groups, sorted.
func (b *Backend) QueueGroups(topic string) []string { return b.FSM().QueueGroups(topic) }

// QueueInFlight lists a queue group's records under a live lease at now
// (Unix ns), at most limit of them, and whether the list was cut.
func (b *Backend) QueueInFlight(topic, name string, now int64, limit int) ([]queue.InFlightRecord, bool, error) {
	if groups, err := b.placedQueue(topic); err == nil && groups != nil {
		return b.inFlightPlaced(groups, topic, name, now, limit)
	}
	return b.FSM().QueueInFlight(topic, name, now, limit)
}

// Backend implements both front ends' interfaces.
var (
	_ backend.API   = (*Backend)(nil)
	_ backend.Kafka = (*Backend)(nil)
)
