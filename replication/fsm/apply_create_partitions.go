package fsm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/logd-dev/logd/backend"
)

// CreatePartitions grows a topic to Count partitions (the new total, as
// Kafka's CreatePartitions counts), at PartitionsLevel. Partitions are
// never removed: a Count below the topic's is refused, an equal one
// changes nothing. The new partitions start empty at offset 0, and every
// replica adds them at the same Raft index, together with what follows
// from them (apply_create_partitions.go).
type CreatePartitions struct {
	Name  string `json:"name"`
	Count int32  `json:"count"`
	// TopicIndex is the CreateIndex of the topic incarnation the proposer
	// saw; a topic deleted and created again since is not grown (0: any).
	TopicIndex uint64 `json:"topic_index,omitempty"`
	// Quota, set by the proposer from its configuration, is checked when
	// the command is applied, as for a creation: the partitions added
	// count against the cluster's partitions and against those of the
	// principal that created the topic.
	Quota *TopicQuota `json:"quota,omitempty"`
	// Placement is the data group of every partition of the grown topic
	// (len Count), at DataGroupLevel (payload version
	// createPartitionsPlacementVersion): the partitions the topic has keep
	// theirs, and the state machine opens the new ones its group hosts.
	// nil puts the new partitions where a topic without a placement has
	// its partitions: in the state machine's group. PlacementEpoch is the
	// topic's placement epoch from then on (with a Placement only).
	Placement      []uint64 `json:"placement,omitempty"`
	PlacementEpoch uint64   `json:"placement_epoch,omitempty"`
}

// createPartitionsPlacementVersion is the create-partitions payload that
// may carry a placement (DataGroupLevel), which a build before would
// ignore.
const createPartitionsPlacementVersion = 2

// EncodeCreatePartitions encodes a create-partitions stamped with now, in
// payload version 1 or, with a placement, createPartitionsPlacementVersion.
func EncodeCreatePartitions(now int64, c CreatePartitions) ([]byte, error) {
	data, err := encodeJSONCommand(CmdCreatePartitions, now, c)
	if err != nil {
		return nil, err
	}
	if c.Placement != nil || c.PlacementEpoch != 0 {
		data[1] = createPartitionsPlacementVersion
	}
	return data, nil
}

func decodeCreatePartitions(p []byte, version byte, _ *keyScratch) (CreatePartitions, error) {
	var c CreatePartitions
	if err := json.Unmarshal(p, &c); err != nil {
		return c, fmt.Errorf("%w: create-partitions: %v", backend.ErrBadCommand, err)
	}
	if version < createPartitionsPlacementVersion && (c.Placement != nil || c.PlacementEpoch != 0) {
		return c, fmt.Errorf("%w: create-partitions version %d with a placement", backend.ErrBadCommand, version)
	}
	return c, nil
}

// validateCreatePartitions checks a growth against the topic t as it
// stands; the proposer calls it before proposing and Apply again.
func validateCreatePartitions(t *Topic, c CreatePartitions) error {
	if c.TopicIndex != 0 && c.TopicIndex != t.CreateIndex {
		return fmt.Errorf("%w: %q was deleted and created again", backend.ErrUnknownTopic, c.Name)
	}
	n := int32(len(t.Partitions))
	if c.Count < n || c.Count > backend.MaxPartitions {
		return &backend.PartitionCountError{Topic: t.Name, Current: n, Requested: c.Count}
	}
	if c.Placement == nil {
		if c.PlacementEpoch != 0 {
			return fmt.Errorf("%w: placement epoch %d without a placement", backend.ErrInvalidArgument, c.PlacementEpoch)
		}
		if t.Placement != nil && c.Count > n {
			return fmt.Errorf("%w: %s has a placement; its new partitions need one", backend.ErrInvalidArgument, t.Name)
		}
		return nil
	}
	if err := validatePlacement(c.Placement, c.Count); err != nil {
		return err
	}
	if !samePlacementPrefix(t.Placement, int(n), t.group, c.Placement) {
		return fmt.Errorf("%w: the placement moves partitions %s has (a growth only places new ones)", backend.ErrInvalidArgument, t.Name)
	}
	if c.PlacementEpoch < t.PlacementEpoch {
		return &PlacementEpochError{Topic: t.Name, Epoch: c.PlacementEpoch, Current: t.PlacementEpoch}
	}
	return nil
}

// ValidateCreatePartitions checks a growth of t as Apply will, but for the
// quota (CheckGrowthQuota), so a proposer refuses a bad one before it
// reaches the Raft log.
func ValidateCreatePartitions(t *Topic, c CreatePartitions) error {
	return validateCreatePartitions(t, c)
}

// CheckGrowthQuota reports whether growing t as c asks would pass c.Quota
// (*backend.QuotaError): the cluster's partitions, and those of the principal that
// created t (a topic created before principals were recorded counts for
// nobody), each with the partitions added. As for CheckQuota, a proposer
// asks to refuse early and only Apply's answer is final.
func (f *FSM) CheckGrowthQuota(t *Topic, c CreatePartitions) error {
	adding := int64(c.Count) - int64(len(t.Partitions))
	if c.Quota == nil || adding <= 0 {
		return nil
	}
	_, parts := f.TopicCounts()
	if q := c.Quota.MaxPartitions; q > 0 && parts+adding > q {
		return &backend.QuotaError{Resource: "partitions", Current: parts, Adding: adding, Limit: q}
	}
	if q := c.Quota.MaxPartitionsPerPrincipal; q > 0 && t.CreatedBy != "" {
		if _, parts := f.PrincipalTopicCounts(t.CreatedBy); parts+adding > q {
			return &backend.QuotaError{Resource: "partitions", Principal: t.CreatedBy, Current: parts, Adding: adding, Limit: q}
		}
	}
	return nil
}

// applyCreatePartitions grows a topic. As for an alter, the FSM publishes a
// copy of the Topic (readers hold Topic values without locks); the old
// partitions, and their logs, are shared, and the new ones are opened
// empty. In the same apply the topic's queue groups gain the partitions
// (so claims and admission control count them from this index on) and
// consumer groups subscribed to the topic are rebalanced, so their
// members own the new partitions from the next generation. The result is
// the topic as it stands afterwards.
func (f *FSM) applyCreatePartitions(index uint64, now int64, c CreatePartitions) any {
	t, err := f.Topic(c.Name)
	if err != nil {
		return err
	}
	if err := validateCreatePartitions(t, c); err != nil {
		return err
	}
	if int(c.Count) == len(t.Partitions) {
		return t
	}
	if err := f.CheckGrowthQuota(t, c); err != nil {
		return err
	}
	nt := *t // fields are copied; the partitions slice is extended below
	nt.Partitions = slices.Clip(t.Partitions)
	if c.Placement != nil {
		nt.Placement, nt.PlacementEpoch = slices.Clone(c.Placement), c.PlacementEpoch
	}
	if err := nt.openPartitions(c.Count, f.logOpts); err != nil {
		return f.stop(fmt.Errorf("create partitions of %s at index %d: %w", c.Name, index, err))
	}
	// Lock order: queueGroups.mu before FSM.mu. A reader sees the queue
	// groups and the topic grown together, or a topic older than its
	// groups (the queue package's readers bound their end offsets).
	f.queues.mu.Lock()
	for _, q := range f.queues.byTopic[c.Name] {
		q.Grow(int(c.Count))
	}
	if w, ok := f.queues.windows[t]; ok {
		delete(f.queues.windows, t)
		f.queues.windows[&nt] = w
	}
	f.mu.Lock()
	f.topics[c.Name] = &nt
	f.mu.Unlock()
	f.queues.mu.Unlock()
	// Waiters on the old partitions (a queue claim's long poll watches
	// every partition of the topic) wake and read the topic again, so they
	// watch the new partitions too.
	for _, p := range t.Hosted() {
		p.signal()
	}
	f.groups.mu.Lock()
	topics := fsmTopics{f: f}
	for _, name := range slices.Sorted(maps.Keys(f.groups.m)) {
		f.groups.m[name].TopicGrew(now, c.Name, topics)
	}
	f.groups.mu.Unlock()
	return &nt
}
