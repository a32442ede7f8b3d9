package backend

import "github.com/logd-dev/logd/group"

// ExternalGroup is a consumer group as a coordinator outside the state
// machine holds it: the Kafka listener's, on the leader, whose members
// live in its memory only (their offsets are replicated).
type ExternalGroup struct {
	// State is the group's state there: "stable", "rebalancing" or
	// "empty" (the states of logd's groups, group.State).
	State string
	// Generation is the coordinator's generation of the group and
	// Rebalances how many generations with members it formed, both since
	// the coordinator took the group (a new leader's start from 0).
	Generation, Rebalances int64
	// Members are its members, joined or joining, in the order they
	// joined; none when the coordinator does not hold the group.
	Members []ExternalMember
}

// ExternalMember is one member of an ExternalGroup.
type ExternalMember struct {
	// MemberID is the id the coordinator gave it; InstanceID its static
	// membership id (group.instance.id), "" if none.
	MemberID, InstanceID string
	// Protocol names the coordinator ("kafka").
	Protocol string
	// ClientID and ClientHost are the client's id and the address it
	// connected from; empty for a member given an id that has not joined
	// yet.
	ClientID, ClientHost string
	// Topics are those it subscribed to and Partitions those it was
	// assigned, as last synced (none while it joins).
	Topics     []string
	Partitions []group.TopicPartition
}

// GroupFetchCheck is a group member's fetch, as AwaitGroupFetch checks it.
type GroupFetchCheck struct {
	Group, Member string
	// Generation is the member's assignment generation.
	Generation int64
	Partition  group.TopicPartition
	// Offset is where the member reads from; negative: not checked.
	Offset int64
}

// GroupJoin adds a member to a consumer group (logd's protocol), creating
// the group on first join; the answer is its assignment.
type GroupJoin struct {
	Group            string
	Member           string
	Topics           []string
	SessionTimeoutMs int64
	Reset            group.ResetPolicy
}

// GroupHeartbeat keeps a member alive and hands back partitions it was
// asked to revoke.
type GroupHeartbeat struct {
	Group    string
	Member   string
	Released []group.TopicPartition
}

// GroupLeave removes a member.
type GroupLeave struct {
	Group  string
	Member string
}

// GroupCommit commits offsets of partitions the member owns at Generation.
type GroupCommit struct {
	Group      string
	Member     string
	Generation int64
	Offsets    []group.OffsetCommit
}

// GroupResetOffsets sets committed offsets (an operator's reset), fencing
// the partitions: live members re-join at the new position.
type GroupResetOffsets struct {
	Group   string
	Offsets []group.OffsetCommit
}

// GroupAutoReset moves a member's committed offset in Partition from From,
// which retention left below the log start, under the member's reset
// policy; To is where the front end read it should go (the log's bounds).
type GroupAutoReset struct {
	Group      string
	Member     string
	Generation int64
	Partition  group.TopicPartition
	From       int64
	To         int64
}

// GroupSetOffsets sets (or with group.DeleteOffset removes) committed
// offsets of a consumer group whose members are coordinated outside the
// state machine: a Kafka consumer group, whose coordinator keeps members
// and generations in memory on the leader. Fence is the group generation
// the coordinator formed its own generation against (group.NoFence for a
// commit outside any generation); a reset since then refuses the commit.
type GroupSetOffsets struct {
	Group   string
	Fence   int64
	Offsets []group.OffsetCommit
}
