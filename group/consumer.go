package group

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Bounds on a member's session timeout.
const (
	MinSessionTimeout = 100 * time.Millisecond
	MaxSessionTimeout = 30 * time.Minute
	// DefaultSessionTimeout applies when a join leaves it zero.
	DefaultSessionTimeout = 10 * time.Second
	// maxNameLen bounds group and member ids.
	maxNameLen = 255
	// maxTopicsPerMember bounds a member's subscription.
	maxTopicsPerMember = 1000
)

// ResetPolicy says where a member starts when its group has no committed
// offset for a partition, or the committed offset fell below the log start
// (retention removed those records): Kafka's auto.offset.reset.
type ResetPolicy string

// The reset policies.
const (
	ResetEarliest ResetPolicy = "earliest"
	ResetLatest   ResetPolicy = "latest"
	ResetNone     ResetPolicy = "none"
)

// ParseResetPolicy parses a policy name; "" means earliest.
func ParseResetPolicy(s string) (ResetPolicy, error) {
	switch ResetPolicy(s) {
	case "", ResetEarliest:
		return ResetEarliest, nil
	case ResetLatest, ResetNone:
		return ResetPolicy(s), nil
	}
	return "", fmt.Errorf("%w: reset policy %q: want earliest, latest or none", ErrInvalidGroupRequest, s)
}

// State is a consumer group's state as shown to operators.
type State string

// The group states.
const (
	// StateEmpty: no live members (offsets may still be committed).
	StateEmpty State = "empty"
	// StateStable: every partition is owned, no move is pending and every
	// member has seen the current generation.
	StateStable State = "stable"
	// StateRebalancing: a partition waits to move between members, or a
	// member has not yet seen the current generation.
	StateRebalancing State = "rebalancing"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Topics is what a consumer group needs to know of the topics. The caller
// (the replicated state machine) answers from its applied state, so the
// answers are the same on every replica at the same index.
type Topics interface {
	// Topic returns a topic's partition count and incarnation (a number
	// that changes when a topic is deleted and created again); ok is false
	// if it does not exist.
	Topic(name string) (partitions int32, incarnation uint64, ok bool)
	// EndOffset returns a partition's end offset (next offset to write).
	EndOffset(topic string, partition int32) int64
}

// ConsumerGroup is one consumer group's replicated state: members, the
// partition assignment with its generations, and committed offsets.
//
// Every method takes the command's time (Unix nanoseconds, stamped by the
// leader) and reads no clock: applied in the same order with the same
// times, replicas reach the same state. Members past their session timeout
// are expired at the start of every mutating method, before the request is
// checked; apart from that time-driven expiry a refused request changes
// nothing. Maps are serialized by encoding/json in key order.
type ConsumerGroup struct {
	Name string `json:"name"`
	// Generation increases at every change of partition ownership and at
	// every offset reset. A partition's owner may commit and fetch only
	// with a generation at or above the partition's Since.
	Generation int64 `json:"generation"`
	// Rebalances counts membership-driven reassignments.
	Rebalances int64 `json:"rebalances"`
	// OffsetResets counts explicit offset resets applied.
	OffsetResets int64                      `json:"offset_resets"`
	Members      map[string]*ConsumerMember `json:"members"`
	Topics       map[string]*ConsumerTopic  `json:"topics"`
}

// ConsumerMember is one live member of a group.
type ConsumerMember struct {
	ID     string   `json:"id"`
	Topics []string `json:"topics"` // sorted, distinct
	// SessionTimeout (ns): the member is expired when a command's time is
	// past LastSeen + SessionTimeout.
	SessionTimeout int64       `json:"session_timeout"`
	LastSeen       int64       `json:"last_seen"`
	JoinedAt       int64       `json:"joined_at"`
	Reset          ResetPolicy `json:"reset"`
	// Acked is the generation last handed to the member (join or
	// heartbeat); below the group's, the member has a change to learn.
	Acked int64 `json:"acked"`
}

// ConsumerTopic is a group's state for one topic.
type ConsumerTopic struct {
	// Incarnation of the topic this state belongs to; a topic deleted and
	// created again starts with no offsets.
	Incarnation uint64              `json:"incarnation"`
	Partitions  []ConsumerPartition `json:"partitions"`
}

// ConsumerPartition is a group's state for one partition.
type ConsumerPartition struct {
	// Committed is the next offset to read (Kafka meaning); -1 for none.
	Committed   int64 `json:"committed"`
	CommittedAt int64 `json:"committed_at"`
	// Owner is the member that may consume the partition; "" for none.
	Owner string `json:"owner,omitempty"`
	// Since is the generation at which Owner got the partition (or at
	// which its offset was last reset): commits and fetches carrying an
	// older generation are stale.
	Since int64 `json:"since"`
	// Pending is the member the partition moves to once Owner releases it
	// (cooperative rebalancing); Owner keeps it until then, or until
	// PendingSince + Owner's session timeout.
	Pending      string `json:"pending,omitempty"`
	PendingSince int64  `json:"pending_since,omitempty"`
	// Skipped counts records never consumed because the committed offset
	// fell below the log start and the reset policy moved it forward;
	// AutoResets counts those moves.
	Skipped    int64 `json:"skipped"`
	AutoResets int64 `json:"auto_resets"`
}

// NewConsumerGroup returns an empty group.
func NewConsumerGroup(name string) *ConsumerGroup {
	return &ConsumerGroup{Name: name, Members: map[string]*ConsumerMember{}, Topics: map[string]*ConsumerTopic{}}
}

// ValidateName checks a group or member id.
func ValidateName(kind, s string) error {
	if s == "" || len(s) > maxNameLen {
		return fmt.Errorf("%w: %s id must be 1 to %d bytes", ErrInvalidGroupRequest, kind, maxNameLen)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s id %q has control characters", ErrInvalidGroupRequest, kind, s)
		}
	}
	return nil
}

// Clone returns a deep copy, for readers and snapshots.
func (g *ConsumerGroup) Clone() *ConsumerGroup {
	c := *g
	c.Members = make(map[string]*ConsumerMember, len(g.Members))
	for id, m := range g.Members {
		mc := *m
		mc.Topics = slices.Clone(m.Topics)
		c.Members[id] = &mc
	}
	c.Topics = make(map[string]*ConsumerTopic, len(g.Topics))
	for name, t := range g.Topics {
		c.Topics[name] = &ConsumerTopic{Incarnation: t.Incarnation, Partitions: slices.Clone(t.Partitions)}
	}
	return &c
}

// State returns empty, stable or rebalancing.
func (g *ConsumerGroup) State() State {
	if len(g.Members) == 0 {
		return StateEmpty
	}
	for _, m := range g.Members {
		if m.Acked < g.Generation {
			return StateRebalancing
		}
	}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			if p.Pending != "" {
				return StateRebalancing
			}
		}
	}
	return StateStable
}

// MemberIDs returns the members' ids, sorted.
func (g *ConsumerGroup) MemberIDs() []string {
	ids := make([]string, 0, len(g.Members))
	for id := range g.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// TopicNames returns the topics the group has state for, sorted.
func (g *ConsumerGroup) TopicNames() []string {
	names := make([]string, 0, len(g.Topics))
	for n := range g.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// KnownTopics returns, sorted, every topic the group has state for or a
// member subscribes to: what "all topics" means for an offset reset.
func (g *ConsumerGroup) KnownTopics() []string {
	names := map[string]bool{}
	for n := range g.Topics {
		names[n] = true
	}
	for _, mem := range g.Members {
		for _, n := range mem.Topics {
			names[n] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Owned returns the partitions a member owns, sorted.
func (g *ConsumerGroup) Owned(member string) []TopicPartition {
	var out []TopicPartition
	for _, name := range g.TopicNames() {
		for p, cp := range g.Topics[name].Partitions {
			if cp.Owner == member {
				out = append(out, TopicPartition{Topic: name, Partition: int32(p)})
			}
		}
	}
	return out
}

// JoinRequest asks to join (or re-join) a group.
type JoinRequest struct {
	Member         string
	Topics         []string
	SessionTimeout time.Duration // 0: DefaultSessionTimeout
	Reset          ResetPolicy   // "": earliest
}

// Assignment is what a member is told after a join or heartbeat.
type Assignment struct {
	Generation int64
	// Partitions the member owns, sorted, with their Since generation and
	// committed offset (-1 for none).
	Partitions []AssignedPartition
	// Revoke lists owned partitions that wait to move to another member:
	// the member should commit them and name them as released in its next
	// heartbeat.
	Revoke []TopicPartition
}

// AssignedPartition is one owned partition of an Assignment.
type AssignedPartition struct {
	TopicPartition
	Since     int64
	Committed int64
}

// Join adds the member (or updates its subscription, session timeout and
// reset policy if it is already a member, keeping its partitions) and
// rebalances.
func (g *ConsumerGroup) Join(now int64, req JoinRequest, topics Topics) (Assignment, error) {
	if err := ValidateName("member", req.Member); err != nil {
		return Assignment{}, err
	}
	if req.SessionTimeout == 0 {
		req.SessionTimeout = DefaultSessionTimeout
	}
	if req.SessionTimeout < MinSessionTimeout || req.SessionTimeout > MaxSessionTimeout {
		return Assignment{}, fmt.Errorf("%w: session timeout %v outside [%v, %v]", ErrInvalidGroupRequest, req.SessionTimeout, MinSessionTimeout, MaxSessionTimeout)
	}
	reset, err := ParseResetPolicy(string(req.Reset))
	if err != nil {
		return Assignment{}, err
	}
	if len(req.Topics) == 0 || len(req.Topics) > maxTopicsPerMember {
		return Assignment{}, fmt.Errorf("%w: a member subscribes to 1 to %d topics", ErrInvalidGroupRequest, maxTopicsPerMember)
	}
	subs := slices.Clone(req.Topics)
	sort.Strings(subs)
	subs = slices.Compact(subs)
	for _, t := range subs {
		if _, _, ok := topics.Topic(t); !ok {
			return Assignment{}, fmt.Errorf("%w: %q", ErrUnknownGroupTopic, t)
		}
	}
	g.Expire(now, topics)
	m, ok := g.Members[req.Member]
	if !ok {
		m = &ConsumerMember{ID: req.Member, JoinedAt: now}
		g.Members[req.Member] = m
	}
	m.Topics, m.SessionTimeout, m.Reset, m.LastSeen = subs, int64(req.SessionTimeout), reset, now
	g.cgRebalance(now, topics)
	return g.cgAssignment(m), nil
}

// Heartbeat keeps a member alive, completes the moves of the partitions it
// released (after committing them), and returns its assignment.
func (g *ConsumerGroup) Heartbeat(now int64, member string, released []TopicPartition, topics Topics) (Assignment, error) {
	g.Expire(now, topics)
	m, ok := g.Members[member]
	if !ok {
		return Assignment{}, fmt.Errorf("%w: %q in group %q", ErrUnknownMember, member, g.Name)
	}
	m.LastSeen = now
	moved := false
	for _, tp := range released {
		if cp := g.cgPartition(tp); cp != nil && cp.Owner == member && cp.Pending != "" {
			g.cgTransfer(cp)
			moved = true
		}
	}
	if moved {
		g.Generation++
	}
	return g.cgAssignment(m), nil
}

// Leave removes a member; its partitions go to the others at once. Leaving
// twice, or after expiry, is not an error.
func (g *ConsumerGroup) Leave(now int64, member string, topics Topics) {
	g.Expire(now, topics)
	if _, ok := g.Members[member]; !ok {
		return
	}
	delete(g.Members, member)
	g.cgRebalance(now, topics)
}

// Expire removes members whose session timed out at now and forces moves
// that waited longer than the owner's session timeout; it reports whether
// anything changed.
func (g *ConsumerGroup) Expire(now int64, topics Topics) bool {
	var gone []string
	for _, id := range g.MemberIDs() {
		m := g.Members[id]
		if now-m.LastSeen > m.SessionTimeout {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		delete(g.Members, id)
	}
	forced := false
	for _, name := range g.TopicNames() {
		for i := range g.Topics[name].Partitions {
			cp := &g.Topics[name].Partitions[i]
			if cp.Pending == "" {
				continue
			}
			if o, ok := g.Members[cp.Owner]; ok && now-cp.PendingSince > o.SessionTimeout {
				g.cgTransfer(cp)
				forced = true
			}
		}
	}
	if forced {
		g.Generation++
	}
	if len(gone) > 0 {
		g.cgRebalance(now, topics)
	}
	return forced || len(gone) > 0
}

// OffsetCommit is one partition's offset in a commit or reset.
type OffsetCommit struct {
	TopicPartition
	Offset int64 `json:"offset"`
}

// Commit records offsets for partitions the member owns at generation.
// An offset below the committed one leaves it unchanged (only a reset
// moves an offset back). A commit also counts as a heartbeat.
func (g *ConsumerGroup) Commit(now int64, member string, generation int64, offsets []OffsetCommit, topics Topics) error {
	if len(offsets) == 0 {
		return fmt.Errorf("%w: commit without offsets", ErrInvalidGroupRequest)
	}
	if err := cgCheckOffsets(offsets, topics); err != nil {
		return err
	}
	g.Expire(now, topics)
	m, ok := g.Members[member]
	if !ok {
		return fmt.Errorf("%w: %q in group %q", ErrUnknownMember, member, g.Name)
	}
	for _, o := range offsets {
		if _, err := g.cgOwned(member, generation, o.TopicPartition); err != nil {
			return err
		}
	}
	for _, o := range offsets {
		cp := g.cgPartition(o.TopicPartition)
		if o.Offset > cp.Committed {
			cp.Committed = o.Offset
		}
		cp.CommittedAt = now
	}
	m.LastSeen = now
	return nil
}

// CheckFetch reports whether member may read the partition with
// generation at time now. It changes nothing.
func (g *ConsumerGroup) CheckFetch(now int64, member string, generation int64, tp TopicPartition) error {
	m, ok := g.Members[member]
	if !ok || now-m.LastSeen > m.SessionTimeout {
		return fmt.Errorf("%w: %q in group %q", ErrUnknownMember, member, g.Name)
	}
	_, err := g.cgOwned(member, generation, tp)
	return err
}

// ResetOffsets sets committed offsets (backwards too) and fences the
// partitions: the generation increases and becomes their Since, so a
// member's commit or fetch from before the reset is stale and it restarts
// at the new offsets. Offsets above the end are clamped to it.
func (g *ConsumerGroup) ResetOffsets(now int64, offsets []OffsetCommit, topics Topics) error {
	if len(offsets) == 0 {
		return fmt.Errorf("%w: reset without offsets", ErrInvalidGroupRequest)
	}
	for _, o := range offsets {
		if err := cgCheckPartition(o.TopicPartition, topics); err != nil {
			return err
		}
		if o.Offset < 0 {
			return fmt.Errorf("%w: negative offset %d for %s-%d", ErrInvalidGroupRequest, o.Offset, o.Topic, o.Partition)
		}
	}
	g.Expire(now, topics)
	g.Generation++
	for _, o := range offsets {
		cp := g.cgEnsurePartition(o.TopicPartition, topics)
		cp.Committed = min(o.Offset, topics.EndOffset(o.Topic, o.Partition))
		cp.CommittedAt = now
		cp.Since = g.Generation
	}
	g.OffsetResets++
	return nil
}

// AutoReset applies a member's reset policy to a partition whose position
// (from, at or above the committed offset) fell below the log start: the
// committed offset moves forward to `to` (chosen by the leader from the
// log's bounds) and the records in between count as skipped. It returns
// the committed offset.
func (g *ConsumerGroup) AutoReset(now int64, member string, generation int64, tp TopicPartition, from, to int64, topics Topics) (int64, error) {
	if err := cgCheckPartition(tp, topics); err != nil {
		return 0, err
	}
	if from < -1 || to < 0 {
		return 0, fmt.Errorf("%w: auto reset from %d to %d", ErrInvalidGroupRequest, from, to)
	}
	g.Expire(now, topics)
	if _, ok := g.Members[member]; !ok {
		return 0, fmt.Errorf("%w: %q in group %q", ErrUnknownMember, member, g.Name)
	}
	cp, err := g.cgOwned(member, generation, tp)
	if err != nil {
		return 0, err
	}
	to = min(to, topics.EndOffset(tp.Topic, tp.Partition))
	if to <= cp.Committed {
		return cp.Committed, nil
	}
	if skipped := to - max(from, cp.Committed, 0); skipped > 0 {
		cp.Skipped += skipped
	}
	cp.Committed, cp.CommittedAt = to, now
	cp.AutoResets++
	g.Members[member].LastSeen = now
	return cp.Committed, nil
}

// cgOwned returns the partition if member owns it at generation.
func (g *ConsumerGroup) cgOwned(member string, generation int64, tp TopicPartition) (*ConsumerPartition, error) {
	if generation > g.Generation {
		return nil, fmt.Errorf("%w: generation %d is ahead of group %q's %d", ErrInvalidGroupRequest, generation, g.Name, g.Generation)
	}
	cp := g.cgPartition(tp)
	if cp == nil || cp.Owner != member {
		if generation < g.Generation {
			return nil, fmt.Errorf("%w: %s-%d is not %q's at generation %d (group is at %d)", ErrStaleGeneration, tp.Topic, tp.Partition, member, generation, g.Generation)
		}
		return nil, fmt.Errorf("%w: %s-%d is not assigned to %q", ErrNotAssigned, tp.Topic, tp.Partition, member)
	}
	if generation < cp.Since {
		return nil, fmt.Errorf("%w: %s-%d changed at generation %d, %q named %d", ErrStaleGeneration, tp.Topic, tp.Partition, cp.Since, member, generation)
	}
	return cp, nil
}

func cgCheckPartition(tp TopicPartition, topics Topics) error {
	n, _, ok := topics.Topic(tp.Topic)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownGroupTopic, tp.Topic)
	}
	if tp.Partition < 0 || tp.Partition >= n {
		return fmt.Errorf("%w: %s has %d partitions, not %d", ErrInvalidGroupRequest, tp.Topic, n, tp.Partition)
	}
	return nil
}

func cgCheckOffsets(offsets []OffsetCommit, topics Topics) error {
	for _, o := range offsets {
		if err := cgCheckPartition(o.TopicPartition, topics); err != nil {
			return err
		}
		if o.Offset < 0 {
			return fmt.Errorf("%w: negative offset %d for %s-%d", ErrInvalidGroupRequest, o.Offset, o.Topic, o.Partition)
		}
		if end := topics.EndOffset(o.Topic, o.Partition); o.Offset > end {
			return fmt.Errorf("%w: %d for %s-%d, which ends at %d", ErrOffsetAboveEnd, o.Offset, o.Topic, o.Partition, end)
		}
	}
	return nil
}

// cgPartition returns the group's state of a partition, or nil.
func (g *ConsumerGroup) cgPartition(tp TopicPartition) *ConsumerPartition {
	t, ok := g.Topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[tp.Partition]
}

// cgEnsureTopic returns the group's state of a topic, made fresh if the
// topic is new to the group or was re-created, and grown to n partitions.
func (g *ConsumerGroup) cgEnsureTopic(name string, n int32, incarnation uint64) *ConsumerTopic {
	t, ok := g.Topics[name]
	if !ok || t.Incarnation != incarnation {
		t = &ConsumerTopic{Incarnation: incarnation}
		g.Topics[name] = t
	}
	for int32(len(t.Partitions)) < n {
		t.Partitions = append(t.Partitions, ConsumerPartition{Committed: -1})
	}
	return t
}

func (g *ConsumerGroup) cgEnsurePartition(tp TopicPartition, topics Topics) *ConsumerPartition {
	n, inc, _ := topics.Topic(tp.Topic)
	return &g.cgEnsureTopic(tp.Topic, n, inc).Partitions[tp.Partition]
}

// cgTransfer completes a pending move. The caller bumps the generation;
// the new owner's Since is that next generation.
func (g *ConsumerGroup) cgTransfer(cp *ConsumerPartition) {
	cp.Owner, cp.Pending, cp.PendingSince, cp.Since = cp.Pending, "", 0, g.Generation+1
}

// cgRebalance recomputes every topic's assignment among the members that
// subscribe to it. A partition whose owner is gone moves at once; one
// whose owner is alive but must give it up becomes pending until the owner
// releases it (cooperative). Any change bumps the generation.
func (g *ConsumerGroup) cgRebalance(now int64, topics Topics) {
	names := map[string]bool{}
	for n := range g.Topics {
		names[n] = true
	}
	for _, m := range g.Members {
		for _, t := range m.Topics {
			names[t] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	memberIDs := g.MemberIDs()
	next := g.Generation + 1
	changed := false
	for _, name := range sorted {
		n, inc, ok := topics.Topic(name)
		if !ok {
			// Deleted topic: its offsets and ownership go with it.
			if _, had := g.Topics[name]; had {
				delete(g.Topics, name)
				changed = true
			}
			continue
		}
		var subs []string
		for _, id := range memberIDs {
			if _, ok := slices.BinarySearch(g.Members[id].Topics, name); ok {
				subs = append(subs, id)
			}
		}
		if len(subs) == 0 {
			if _, had := g.Topics[name]; !had {
				continue
			}
		}
		t := g.cgEnsureTopic(name, n, inc)
		owners := make([]string, len(t.Partitions))
		for i, cp := range t.Partitions {
			owners[i] = cp.Owner
		}
		target := AssignPartitions(subs, n, owners)
		for i := range t.Partitions {
			cp := &t.Partitions[i]
			want := target[i]
			_, ownerLive := slices.BinarySearch(subs, cp.Owner)
			switch {
			case want == cp.Owner:
				if cp.Pending != "" {
					cp.Pending, cp.PendingSince = "", 0
					changed = true
				}
			case cp.Owner == "" || !ownerLive:
				cp.Owner, cp.Pending, cp.PendingSince, cp.Since = want, "", 0, next
				changed = true
			case cp.Pending != want:
				cp.Pending, cp.PendingSince = want, now
				changed = true
			}
		}
	}
	if changed {
		g.Generation = next
		g.Rebalances++
	}
}

// cgAssignment reports a member's assignment and records that the member
// has seen the current generation.
func (g *ConsumerGroup) cgAssignment(m *ConsumerMember) Assignment {
	m.Acked = g.Generation
	a := Assignment{Generation: g.Generation}
	for _, tp := range g.Owned(m.ID) {
		cp := g.cgPartition(tp)
		a.Partitions = append(a.Partitions, AssignedPartition{TopicPartition: tp, Since: cp.Since, Committed: cp.Committed})
		if cp.Pending != "" {
			a.Revoke = append(a.Revoke, tp)
		}
	}
	return a
}
