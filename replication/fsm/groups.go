package fsm

import (
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// consumerGroups is the FSM's consumer group state. It is mutated only on
// the Raft goroutine (by the apply_group_* functions and Restore), under
// mu's write lock, so the Raft goroutine reads it without the lock;
// readers on other goroutines take the read lock and get deep copies.
type consumerGroups struct {
	mu sync.RWMutex
	// m holds the groups by name; guarded by mu. nil until the first group.
	m map[string]*group.ConsumerGroup
	// homes are the data groups the meta group placed consumer groups in
	// (group_homes.go; meta group only); guarded by mu.
	homes map[string]uint64
	// topics is a data group's catalog of the meta group's topics its
	// consumer groups name (apply_group_hosted.go); guarded by mu.
	topics map[string]groupTopicEntry
}

// groupsManifestVersion is the version of the consumer group part of a
// snapshot manifest.
const groupsManifestVersion = 1

// groupsManifest is the consumer group state in a snapshot. Homes and
// Topics are written only once set (from HashedGroupsLevel), so a
// snapshot without them reads as before.
type groupsManifest struct {
	Version int                    `json:"version"`
	Groups  []*group.ConsumerGroup `json:"groups"`
	// Homes are the meta group's placements of consumer groups, by name
	// (JSON writes a map's keys sorted).
	Homes map[string]uint64 `json:"homes,omitempty"`
	// Topics is a data group's catalog of topics, sorted by name.
	Topics []groupTopicManifest `json:"topics,omitempty"`
}

// fsmTopics answers the group package's questions from applied state.
// In a data group the topics are the catalog the group commands carried
// (apply_group_hosted.go), as the meta group knew them, and a partition's
// end is the one the command carried, else that of the partition when
// this data group hosts it. EndOffset is the state machine's end
// (Partition.next), not the log's,
// which runs ahead of it while a restart or a snapshot install replays
// entries the log already holds: a commit or reset decided against the
// log's end would then differ between replicas. Partition.next is the Raft
// goroutine's alone, so a dry run (DryRunGroup, on a proposer's goroutine)
// reads the log's end instead: it only refuses early what Apply would
// refuse, and Apply decides.
//
// ends are the ends a command carries for partitions another data group
// hosts (PartitionEnd).
type fsmTopics struct {
	f    *FSM
	ends []PartitionEnd
}

func (t fsmTopics) Topic(name string) (int32, uint64, bool) {
	if t.f.group != 0 {
		// The Raft goroutine's (or a dry run's own copy): read without
		// the lock its writer holds around the group commands.
		e, ok := t.f.groups.topics[name]
		return e.Partitions, e.Incarnation, ok && e.Incarnation != 0
	}
	tp, err := t.f.Topic(name)
	if err != nil {
		return 0, 0, false
	}
	return int32(len(tp.Partitions)), tp.CreateIndex, true
}

func (t fsmTopics) EndOffset(topic string, p int32) int64 {
	if t.f.group != 0 {
		return t.hostedEnd(topic, p)
	}
	part, err := t.f.Partition(topic, p)
	if err != nil {
		if end, ok := endOf(t.ends, topic, p); ok && elsewhere(err) {
			return end
		}
		return 0
	}
	if t.f.dryRun {
		return part.log.EndOffset()
	}
	return part.next
}

// ConsumerGroup returns a copy of a consumer group's state.
func (f *FSM) ConsumerGroup(name string) (*group.ConsumerGroup, error) {
	f.groups.mu.RLock()
	defer f.groups.mu.RUnlock()
	g, ok := f.groups.m[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", group.ErrConsumerGroupNotFound, name)
	}
	return g.Clone(), nil
}

// ConsumerGroups returns copies of every consumer group, sorted by name.
func (f *FSM) ConsumerGroups() []*group.ConsumerGroup {
	f.groups.mu.RLock()
	out := make([]*group.ConsumerGroup, 0, len(f.groups.m))
	for _, g := range f.groups.m {
		out = append(out, g.Clone())
	}
	f.groups.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CheckGroupFetch reports whether a member may read a partition with a
// generation, against applied state and the FSM's clock (the time of the
// last applied command), so a member whose session already ran out is
// refused even before a command expires it.
func (f *FSM) CheckGroupFetch(name, member string, generation int64, tp group.TopicPartition) error {
	f.groups.mu.RLock()
	defer f.groups.mu.RUnlock()
	g, ok := f.groups.m[name]
	if !ok {
		return fmt.Errorf("%w: %q", group.ErrConsumerGroupNotFound, name)
	}
	return g.CheckFetch(f.now.Load(), member, generation, tp)
}

// mutateGroup runs fn on the named group under the write lock; with create
// a missing group is made (and dropped again if fn fails on it).
func (f *FSM) mutateGroup(name string, create bool, fn func(g *group.ConsumerGroup) (any, error)) any {
	if err := group.ValidateName("group", name); err != nil {
		return err
	}
	f.groups.mu.Lock()
	defer f.groups.mu.Unlock()
	if err := f.groups.elsewhere(name); err != nil {
		return err
	}
	g, ok := f.groups.m[name]
	if !ok {
		if !create {
			return fmt.Errorf("%w: %q", group.ErrConsumerGroupNotFound, name)
		}
		g = group.NewConsumerGroup(name)
	}
	res, err := fn(g)
	if err != nil {
		return err
	}
	if !ok {
		if f.groups.m == nil {
			f.groups.m = map[string]*group.ConsumerGroup{}
		}
		f.groups.m[name] = g
	}
	return res
}

// snapshot copies the groups for a snapshot manifest.
func (c *consumerGroups) snapshot() *groupsManifest {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.m) == 0 && len(c.homes) == 0 && len(c.topics) == 0 {
		return nil
	}
	m := &groupsManifest{Version: groupsManifestVersion, Homes: maps.Clone(c.homes), Topics: c.topicsManifest()}
	for _, g := range c.m {
		m.Groups = append(m.Groups, g.Clone())
	}
	sort.Slice(m.Groups, func(i, j int) bool { return m.Groups[i].Name < m.Groups[j].Name })
	return m
}

// restore replaces the groups with a snapshot's (nil: none).
func (c *consumerGroups) restore(m *groupsManifest) error {
	groups := map[string]*group.ConsumerGroup{}
	var homes map[string]uint64
	var topics map[string]groupTopicEntry
	if m != nil {
		if m.Version != groupsManifestVersion {
			return fmt.Errorf("restore: %w: consumer groups version %d", backend.ErrUnknownCommand, m.Version)
		}
		var err error
		if homes, err = restoreHomes(m.Homes); err != nil {
			return err
		}
		if topics, err = restoreGroupTopics(m.Topics); err != nil {
			return err
		}
		for _, g := range m.Groups {
			if g.Members == nil {
				g.Members = map[string]*group.ConsumerMember{}
			}
			if g.Topics == nil {
				g.Topics = map[string]*group.ConsumerTopic{}
			}
			groups[g.Name] = g
		}
	}
	c.mu.Lock()
	c.m, c.homes, c.topics = groups, homes, topics
	c.mu.Unlock()
	return nil
}

// DryRunGroup applies c, a consumer group command of kind t on the named
// group, to a copy of the applied state at now and returns the result; the
// real state is not changed. A proposer uses it to refuse a request that
// Apply would refuse, before it reaches the Raft log.
func (f *FSM) DryRunGroup(t CommandType, name string, now int64, c any) any {
	row := commandOf(t)
	if row == nil {
		return fmt.Errorf("%w: %s", backend.ErrUnknownCommand, t)
	}
	// Copy only what group commands read: the topic map (its topics are
	// only read) and the group involved (a deep copy).
	// In a data group, the catalog of topics too (copied: a group-hosted
	// command adds to it); in the meta group, the group's home.
	shadow := &FSM{dryRun: true, group: f.group}
	f.mu.RLock()
	shadow.topics = maps.Clone(f.topics)
	f.mu.RUnlock()
	shadow.groups.m = map[string]*group.ConsumerGroup{}
	if g, err := f.ConsumerGroup(name); err == nil {
		shadow.groups.m[name] = g
	}
	f.groups.mu.RLock()
	shadow.groups.topics = maps.Clone(f.groups.topics)
	if h, ok := f.groups.homes[name]; ok {
		shadow.groups.homes = map[string]uint64{name: h}
	}
	f.groups.mu.RUnlock()
	return row.apply(shadow, 0, now, c)
}
