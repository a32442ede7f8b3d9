package fsm

import (
	"fmt"
	"maps"
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/partition"
)

// PartitionAdopt has a data group's state machine host its partitions of
// one topic incarnation, at DataGroupLevel: the meta group's leader
// proposes it into each data group its placement names
// (docs/architecture.md, "Data groups"), and a data group's Apply never
// reads the meta group's state, so the command carries what the data
// group needs to know of the topic.
//
// The partitions adopted are those Placement puts in the state machine's
// group (Config.Group); the others stay nil, and commands naming them are
// refused (*PartitionElsewhereError). The first adopt of an incarnation
// creates the topic's entry, named and given the directory
// "<topic>~<CreateIndex>" after the meta group's index, so no two
// incarnations share files. A later adopt of the same incarnation at the
// same or a later epoch extends it: the count may grow and partitions may
// be placed here, which open empty at offset 0 (moving a partition's
// data is not the adopt's), while a partition already hosted here must
// stay here. An adopt at an epoch older than the topic's is refused
// (*PlacementEpochError), one of an older incarnation
// (backend.ErrUnknownTopic) or while an older one is still here
// (backend.ErrTopicExists) too; a refusal changes nothing. An adopt
// that changes nothing (the same one applied again) answers the topic.
type PartitionAdopt struct {
	Topic string `json:"topic"`
	// CreateIndex is the meta group's Raft index that created this
	// incarnation of the topic.
	CreateIndex uint64 `json:"create_index"`
	// Partitions is the topic's partition count.
	Partitions int32 `json:"partitions"`
	// Config is the topic's settings; used when the entry is created (an
	// alter-topic changes them afterwards, as for any topic).
	Config map[string]string `json:"config,omitempty"`
	// CreatedNanos is when the meta group created the topic (0: the
	// adopt's time), CreatedBy the principal that created it.
	CreatedNanos int64  `json:"created_nanos,omitempty"`
	CreatedBy    string `json:"created_by,omitempty"`
	// Placement is the data group of every partition (len Partitions).
	Placement []uint64 `json:"placement"`
	// Epoch is the placement's epoch.
	Epoch uint64 `json:"epoch"`
}

// ValidatePartitionAdopt checks a PartitionAdopt as Apply does before it
// looks at the state, so a proposer can refuse a malformed one.
func ValidatePartitionAdopt(c PartitionAdopt) error {
	_, err := validatePartitionAdopt(c)
	return err
}

func validatePartitionAdopt(c PartitionAdopt) (map[string]string, error) {
	if err := partition.ValidateTopicName(c.Topic); err != nil {
		return nil, fmt.Errorf("%w: %v", backend.ErrInvalidArgument, err)
	}
	if c.CreateIndex == 0 {
		return nil, fmt.Errorf("%w: partition-adopt of %s without the topic's create index", backend.ErrInvalidArgument, c.Topic)
	}
	if c.Partitions < 1 || c.Partitions > backend.MaxPartitions {
		return nil, fmt.Errorf("%w: partitions must be in [1, %d], got %d", backend.ErrInvalidArgument, backend.MaxPartitions, c.Partitions)
	}
	if c.Placement == nil {
		return nil, fmt.Errorf("%w: partition-adopt of %s without a placement", backend.ErrInvalidArgument, c.Topic)
	}
	if err := validatePlacement(c.Placement, c.Partitions); err != nil {
		return nil, err
	}
	if c.CreatedBy != "" {
		if err := validPrincipal(c.CreatedBy); err != nil {
			return nil, invalid("partition-adopt principal", err)
		}
	}
	return ResolveTopicConfig(c.Config)
}

func (f *FSM) applyPartitionAdopt(index uint64, now int64, c PartitionAdopt) any {
	cfg, err := validatePartitionAdopt(c)
	if err != nil {
		return err
	}
	t, err := f.Topic(c.Topic)
	if err != nil {
		created := c.CreatedNanos
		if created == 0 {
			created = now
		}
		nt := &Topic{Name: c.Topic, Config: cfg, CreatedNanos: created, CreateIndex: c.CreateIndex, CreatedBy: c.CreatedBy,
			Placement: slices.Clone(c.Placement), PlacementEpoch: c.Epoch, group: f.group}
		if err := openTopic(f.root, nt, c.Partitions, f.logOpts); err != nil {
			return f.stop(fmt.Errorf("adopt partitions of %s at index %d: %w", c.Topic, index, err))
		}
		f.mu.Lock()
		f.topics[c.Topic] = nt
		f.topicsArrivedLocked()
		f.mu.Unlock()
		return nt
	}
	switch {
	case t.CreateIndex > c.CreateIndex:
		return fmt.Errorf("%w: %q was deleted and created again (at index %d, the adopt names %d)", backend.ErrUnknownTopic, c.Topic, t.CreateIndex, c.CreateIndex)
	case t.CreateIndex < c.CreateIndex:
		return fmt.Errorf("%w: %q of index %d is still here, the adopt names %d", backend.ErrTopicExists, c.Topic, t.CreateIndex, c.CreateIndex)
	case c.Epoch < t.PlacementEpoch:
		return &PlacementEpochError{Topic: c.Topic, Epoch: c.Epoch, Current: t.PlacementEpoch}
	case int(c.Partitions) < len(t.Partitions):
		return &backend.PartitionCountError{Topic: c.Topic, Current: int32(len(t.Partitions)), Requested: c.Partitions}
	}
	for i, p := range t.Partitions {
		if p != nil && c.Placement[i] != f.group {
			return fmt.Errorf("%w: the adopt places %s-%d, hosted here, in data group %d", backend.ErrInvalidArgument, c.Topic, i, c.Placement[i])
		}
	}
	if c.Epoch == t.PlacementEpoch && int(c.Partitions) == len(t.Partitions) && slices.Equal(c.Placement, t.Placement) {
		return t // applied already
	}
	if c.Epoch == t.PlacementEpoch {
		return fmt.Errorf("%w: another placement of %s at epoch %d", backend.ErrInvalidArgument, c.Topic, c.Epoch)
	}
	nt := *t // fields are copied; the partitions slice is replaced below
	nt.Placement, nt.PlacementEpoch = slices.Clone(c.Placement), c.Epoch
	if err := nt.adopt(t.Partitions, c.Partitions, f.logOpts); err != nil {
		return f.stop(fmt.Errorf("adopt partitions of %s at index %d: %w", c.Topic, index, err))
	}
	// As for a growth (apply_create_partitions.go): the queue groups gain
	// the partitions, the consumer groups rebalance, waiters wake.
	f.queues.mu.Lock()
	if n := int(c.Partitions); n > len(t.Partitions) {
		for _, q := range f.queues.byTopic[c.Topic] {
			q.Grow(n)
		}
	}
	if w, ok := f.queues.windows[t]; ok {
		delete(f.queues.windows, t)
		f.queues.windows[&nt] = w
	}
	f.mu.Lock()
	f.topics[c.Topic] = &nt
	f.topicsArrivedLocked()
	f.mu.Unlock()
	f.queues.mu.Unlock()
	for _, p := range t.Hosted() {
		p.signal()
	}
	if int(c.Partitions) > len(t.Partitions) {
		f.groups.mu.Lock()
		topics := fsmTopics{f: f}
		for _, name := range slices.Sorted(maps.Keys(f.groups.m)) {
			f.groups.m[name].TopicGrew(now, c.Topic, topics)
		}
		f.groups.mu.Unlock()
	}
	return &nt
}

// adopt makes t.Partitions the partitions of old (shared) plus those its
// placement now puts here, opened, up to n; on an error the logs it opened
// are closed again.
func (t *Topic) adopt(old []*Partition, n int32, base log.Options) error {
	t.Partitions = slices.Clone(old)
	var opened []*Partition
	for i, p := range t.Partitions {
		if p != nil || !t.hosts(int32(i)) {
			continue
		}
		np, err := t.openPartition(int32(i), base)
		if err != nil {
			for _, p := range opened {
				p.log.Close()
			}
			return err
		}
		t.Partitions[i] = np
		opened = append(opened, np)
	}
	if err := t.openPartitions(n, base); err != nil {
		for _, p := range opened {
			p.log.Close()
		}
		return err
	}
	return nil
}
