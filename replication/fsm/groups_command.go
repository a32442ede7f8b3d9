package fsm

import "github.com/logd-dev/logd/group"

// GroupJoin adds a member to a consumer group (creating the group) or
// updates its subscription.
type GroupJoin struct {
	Group            string            `json:"group"`
	Member           string            `json:"member"`
	Topics           []string          `json:"topics"`
	SessionTimeoutMs int64             `json:"session_timeout_ms"`
	Reset            group.ResetPolicy `json:"reset"`
}

// GroupHeartbeat keeps a member alive and hands back partitions it was
// asked to revoke.
type GroupHeartbeat struct {
	Group    string                 `json:"group"`
	Member   string                 `json:"member"`
	Released []group.TopicPartition `json:"released,omitempty"`
}

// GroupLeave removes a member.
type GroupLeave struct {
	Group  string `json:"group"`
	Member string `json:"member"`
}

// GroupCommit commits offsets of partitions the member owns at Generation.
type GroupCommit struct {
	Group      string               `json:"group"`
	Member     string               `json:"member"`
	Generation int64                `json:"generation"`
	Offsets    []group.OffsetCommit `json:"offsets"`
	// Ends bounds offsets of partitions another data group hosts
	// (PartitionEnd).
	Ends []PartitionEnd `json:"ends,omitempty"`
}

// GroupResetOffsets sets committed offsets, chosen by the leader from the
// log's bounds, and fences the partitions (an operator's reset).
type GroupResetOffsets struct {
	Group   string               `json:"group"`
	Offsets []group.OffsetCommit `json:"offsets"`
	// Ends bounds offsets of partitions another data group hosts
	// (PartitionEnd).
	Ends []PartitionEnd `json:"ends,omitempty"`
}

// GroupAutoReset moves a partition's committed offset forward under the
// member's reset policy, after retention removed the records at its
// position. To is chosen by the leader from the log's bounds.
type GroupAutoReset struct {
	Group      string               `json:"group"`
	Member     string               `json:"member"`
	Generation int64                `json:"generation"`
	Partition  group.TopicPartition `json:"partition"`
	From       int64                `json:"from"`
	To         int64                `json:"to"`
	// Ends bounds the partition's offset when another data group hosts
	// it (PartitionEnd).
	Ends []PartitionEnd `json:"ends,omitempty"`
}

// GroupDelete deletes a consumer group without live members.
type GroupDelete struct {
	Group string `json:"group"`
}
