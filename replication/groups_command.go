package replication

import (
	"encoding/json"
	"fmt"

	"github.com/logd-dev/logd/group"
)

// Consumer group command types (issue 4; 10-19 are reserved for them).
const (
	CmdGroupJoin         CommandType = 10
	CmdGroupHeartbeat    CommandType = 11
	CmdGroupLeave        CommandType = 12
	CmdGroupCommit       CommandType = 13
	CmdGroupResetOffsets CommandType = 14
	CmdGroupAutoReset    CommandType = 15
	CmdGroupDelete       CommandType = 16
)

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
}

// GroupResetOffsets sets committed offsets, chosen by the leader from the
// log's bounds, and fences the partitions (an operator's reset).
type GroupResetOffsets struct {
	Group   string               `json:"group"`
	Offsets []group.OffsetCommit `json:"offsets"`
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
}

// GroupDelete deletes a consumer group without live members.
type GroupDelete struct {
	Group string `json:"group"`
}

// groupCommand is a decoded consumer group command; applyGroup applies it
// (each in its own apply_group_*.go).
type groupCommand interface {
	applyGroup(f *FSM, now int64) any
}

func groupCommandName(t CommandType) string {
	switch t {
	case CmdGroupJoin:
		return "group-join"
	case CmdGroupHeartbeat:
		return "group-heartbeat"
	case CmdGroupLeave:
		return "group-leave"
	case CmdGroupCommit:
		return "group-commit"
	case CmdGroupResetOffsets:
		return "group-reset-offsets"
	case CmdGroupAutoReset:
		return "group-auto-reset"
	case CmdGroupDelete:
		return "group-delete"
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// decodeGroupCommand decodes the JSON payload of a group command. Group
// commands are small; JSON keeps them readable in a raft log dump.
func decodeGroupCommand(t CommandType, p []byte) (groupCommand, error) {
	var c groupCommand
	switch t {
	case CmdGroupJoin:
		c = &GroupJoin{}
	case CmdGroupHeartbeat:
		c = &GroupHeartbeat{}
	case CmdGroupLeave:
		c = &GroupLeave{}
	case CmdGroupCommit:
		c = &GroupCommit{}
	case CmdGroupResetOffsets:
		c = &GroupResetOffsets{}
	case CmdGroupAutoReset:
		c = &GroupAutoReset{}
	case CmdGroupDelete:
		c = &GroupDelete{}
	default:
		return nil, fmt.Errorf("%w: %s", ErrUnknownCommand, t)
	}
	if err := json.Unmarshal(p, c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadCommand, t, err)
	}
	return c, nil
}
