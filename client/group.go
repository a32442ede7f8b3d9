package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// GroupSummary is one consumer group in ListGroups.
type GroupSummary struct {
	Group string `json:"group"`
	// State is empty, stable or rebalancing.
	State      string   `json:"state"`
	Members    int      `json:"members"`
	Generation int64    `json:"generation"`
	Topics     []string `json:"topics"`
}

// GroupMember is a live member of a consumer group.
type GroupMember struct {
	ID string `json:"member_id"`
	// Protocol is how the member belongs to the group: "logd" (this
	// client's group consumer, logctl consume --group) or "kafka" (a
	// Kafka client, which the leader's Kafka group coordinator holds).
	Protocol       string           `json:"protocol"`
	Topics         []string         `json:"topics"`
	Partitions     []TopicPartition `json:"partitions"`
	LastSeen       time.Time        `json:"last_seen"`
	Joined         time.Time        `json:"joined"`
	SessionTimeout time.Duration    `json:"session_timeout_ms"`
	ResetPolicy    string           `json:"reset_policy"`
	// ClientID, ClientHost and InstanceID are a Kafka member's client.id,
	// the address it connected from and its group.instance.id (static
	// membership); empty for a logd member.
	ClientID   string `json:"client_id,omitempty"`
	ClientHost string `json:"client_host,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
}

// GroupPartition is a consumer group's position in one partition.
type GroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the next offset to read; -1 when nothing is committed.
	Committed   int64     `json:"committed_offset"`
	CommittedAt time.Time `json:"committed_at,omitzero"`
	LogStart    int64     `json:"log_start_offset"`
	End         int64     `json:"end_offset"`
	// LagRecords is end minus the committed offset (or the log start).
	LagRecords int64 `json:"lag_records"`
	// Lag is the age of the oldest record not yet committed.
	Lag             time.Duration `json:"lag_ms"`
	Owner           string        `json:"owner,omitempty"`
	PendingOwner    string        `json:"pending_owner,omitempty"`
	SinceGeneration int64         `json:"since_generation"`
	// Skipped counts records skipped by the reset policy after retention
	// passed the committed offset; AutoResets how often that happened.
	Skipped    int64 `json:"skipped_records"`
	AutoResets int64 `json:"auto_resets"`
}

// GroupDescription is a consumer group's state, members and offsets.
type GroupDescription struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	Generation   int64  `json:"generation"`
	Rebalances   int64  `json:"rebalances"`
	OffsetResets int64  `json:"offset_resets"`
	// Home is the Raft group that holds the group's state, as the node
	// asked knows it: 0 for the meta group, else a data group.
	Home       uint64           `json:"home,omitempty"`
	Members    []GroupMember    `json:"members"`
	Partitions []GroupPartition `json:"partitions"`
}

// ListGroups lists the consumer groups, internal ones (a redrive job's
// position) left out.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	return c.ListGroupsWith(ctx, ListGroupsOptions{})
}

// ListGroupsOptions says which groups ListGroupsWith lists.
type ListGroupsOptions struct {
	// All lists internal groups too (a redrive job's position,
	// logd-redrive.*), which are left out otherwise.
	All bool
}

// ListGroupsWith is ListGroups with options.
func (c *Client) ListGroupsWith(ctx context.Context, o ListGroupsOptions) ([]GroupSummary, error) {
	var out []GroupSummary
	err := c.do(ctx, "ListGroups", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListGroups(ctx, connect.NewRequest(&logdv1.ListGroupsRequest{All: o.All}))
		if err != nil {
			return fromRPC(err)
		}
		out = make([]GroupSummary, 0, len(resp.Msg.Groups))
		for _, g := range resp.Msg.Groups {
			out = append(out, GroupSummary{Group: g.Group, State: g.State, Members: int(g.Members), Generation: g.Generation, Topics: g.Topics})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	return out, nil
}

// DescribeGroup returns a consumer group's state; ErrUnknownGroup if it
// does not exist.
func (c *Client) DescribeGroup(ctx context.Context, group string) (GroupDescription, error) {
	var out GroupDescription
	err := c.do(ctx, "DescribeGroup", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.DescribeGroup(ctx, connect.NewRequest(&logdv1.DescribeGroupRequest{Group: group}))
		if err != nil {
			return fromRPC(err)
		}
		m := resp.Msg
		out = GroupDescription{Group: m.Group, State: m.State, Generation: m.Generation, Rebalances: m.Rebalances, OffsetResets: m.OffsetResets, Home: m.Home}
		for _, mm := range m.Members {
			gm := GroupMember{ID: mm.MemberId, Protocol: mm.Protocol, Topics: mm.Topics, LastSeen: msToTime(mm.LastSeenMs), Joined: msToTime(mm.JoinedMs),
				SessionTimeout: time.Duration(mm.SessionTimeoutMs) * time.Millisecond, ResetPolicy: mm.ResetPolicy,
				ClientID: mm.ClientId, ClientHost: mm.ClientHost, InstanceID: mm.InstanceId}
			for _, tp := range mm.Partitions {
				gm.Partitions = append(gm.Partitions, TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
			}
			out.Members = append(out.Members, gm)
		}
		for _, p := range m.Partitions {
			out.Partitions = append(out.Partitions, GroupPartition{
				Topic: p.Topic, Partition: p.Partition, Committed: p.CommittedOffset, CommittedAt: msToTime(p.CommittedMs),
				LogStart: p.LogStartOffset, End: p.EndOffset, LagRecords: p.LagRecords,
				Lag:   time.Duration(p.LagSeconds * float64(time.Second)),
				Owner: p.Owner, PendingOwner: p.PendingOwner, SinceGeneration: p.SinceGeneration,
				Skipped: p.SkippedRecords, AutoResets: p.AutoResets,
			})
		}
		return nil
	})
	if err != nil {
		return GroupDescription{}, fmt.Errorf("describe group %q: %w", group, err)
	}
	return out, nil
}

// DeleteGroup deletes a consumer group and its committed offsets. A group
// with live members is refused with ErrGroupNotEmpty.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	err := c.do(ctx, "DeleteGroup", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		_, err := c.rpc.DeleteGroup(ctx, connect.NewRequest(&logdv1.DeleteGroupRequest{Group: group}))
		return fromRPC(err)
	})
	if err != nil {
		return fmt.Errorf("delete group %q: %w", group, err)
	}
	return nil
}

// Reset strategies of ResetOffsetsRequest.Strategy.
const (
	ResetToEarliest = "to-earliest"
	ResetToLatest   = "to-latest"
	ResetToOffset   = "to-offset"
	ResetToDatetime = "to-datetime"
	ResetShiftBy    = "shift-by"
	ResetByDuration = "by-duration"
	// ResetExplicit sets the offsets listed in Offsets (a saved plan).
	ResetExplicit = "explicit"
)

// ResetOffsetsRequest asks for an offset reset of a consumer group.
type ResetOffsetsRequest struct {
	Group string
	// Topics selects partitions: a topic mapped to no partitions means all
	// of them. AllTopics selects every topic of the group instead.
	Topics    map[string][]int32
	AllTopics bool
	Strategy  string
	Offset    int64         // ResetToOffset
	Time      time.Time     // ResetToDatetime
	Shift     int64         // ResetShiftBy
	Duration  time.Duration // ResetByDuration: now minus Duration
	// Offsets for ResetExplicit.
	Offsets []PlannedReset
	// Execute applies the plan; without it nothing changes.
	Execute bool
}

// PlannedReset is one partition's line of a reset plan (also the format
// of a plan file: topic, partition and new_offset are what an explicit
// reset reads).
type PlannedReset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current_offset"`
	New       int64  `json:"new_offset"`
	Requested int64  `json:"requested_offset"`
	Clamped   bool   `json:"clamped,omitempty"`
	LagBefore int64  `json:"lag_before"`
	LagAfter  int64  `json:"lag_after"`
}

// ResetPlan is the answer to a reset: the plan, and whether it was applied.
type ResetPlan struct {
	Group      string         `json:"group"`
	Executed   bool           `json:"executed"`
	Generation int64          `json:"generation,omitempty"`
	Partitions []PlannedReset `json:"partitions"`
}

// ResetGroupOffsets plans an offset reset and, with Execute, applies it
// atomically; live members are fenced and restart at the new offsets.
func (c *Client) ResetGroupOffsets(ctx context.Context, r ResetOffsetsRequest) (ResetPlan, error) {
	req := &logdv1.ResetGroupOffsetsRequest{Group: r.Group, AllTopics: r.AllTopics, Strategy: r.Strategy, Offset: r.Offset,
		ShiftBy: r.Shift, DurationMs: r.Duration.Milliseconds(), Execute: r.Execute}
	if !r.Time.IsZero() {
		req.TimestampMs = r.Time.UnixMilli()
	}
	for _, t := range slices.Sorted(maps.Keys(r.Topics)) {
		req.Topics = append(req.Topics, &logdv1.ResetTopic{Topic: t, Partitions: r.Topics[t]})
	}
	for _, o := range r.Offsets {
		req.Offsets = append(req.Offsets, &logdv1.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.New})
	}
	rc := retryAny
	if r.Execute {
		rc = retryUnwritten
	}
	out := ResetPlan{Group: r.Group}
	err := c.do(ctx, "ResetGroupOffsets", rc, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ResetGroupOffsets(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out.Executed, out.Generation, out.Partitions = resp.Msg.Executed, resp.Msg.Generation, nil
		for _, p := range resp.Msg.Plan {
			out.Partitions = append(out.Partitions, PlannedReset{Topic: p.Topic, Partition: p.Partition, Current: p.CurrentOffset,
				New: p.NewOffset, Requested: p.RequestedOffset, Clamped: p.Clamped, LagBefore: p.LagBefore, LagAfter: p.LagAfter})
		}
		return nil
	})
	if err != nil {
		return ResetPlan{}, fmt.Errorf("reset offsets of group %q: %w", r.Group, err)
	}
	return out, nil
}

// The member calls below are idempotent (a repeated join, heartbeat,
// commit or leave has the effect of one), so they are retried on every
// retryable error.

func (c *Client) joinGroup(ctx context.Context, req *logdv1.JoinGroupRequest) (*logdv1.GroupAssignment, error) {
	var out *logdv1.GroupAssignment
	err := c.do(ctx, "JoinGroup", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.JoinGroup(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out = resp.Msg.Assignment
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("join group %q: %w", req.Group, err)
	}
	return out, nil
}

func (c *Client) groupHeartbeat(ctx context.Context, req *logdv1.GroupHeartbeatRequest) (*logdv1.GroupAssignment, error) {
	var out *logdv1.GroupAssignment
	err := c.do(ctx, "GroupHeartbeat", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.GroupHeartbeat(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out = resp.Msg.Assignment
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat group %q: %w", req.Group, err)
	}
	return out, nil
}

func (c *Client) leaveGroup(ctx context.Context, group, member string) error {
	err := c.do(ctx, "LeaveGroup", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		_, err := c.rpc.LeaveGroup(ctx, connect.NewRequest(&logdv1.LeaveGroupRequest{Group: group, MemberId: member}))
		return fromRPC(err)
	})
	if err != nil {
		return fmt.Errorf("leave group %q: %w", group, err)
	}
	return nil
}

func (c *Client) commitOffsets(ctx context.Context, req *logdv1.CommitOffsetsRequest) error {
	err := c.do(ctx, "CommitOffsets", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		_, err := c.rpc.CommitOffsets(ctx, connect.NewRequest(req))
		return fromRPC(err)
	})
	if err != nil {
		return fmt.Errorf("commit offsets of group %q: %w", req.Group, err)
	}
	return nil
}

func (c *Client) groupFetch(ctx context.Context, req *logdv1.GroupFetchRequest, maxWait time.Duration) (*logdv1.GroupFetchResponse, error) {
	var out *logdv1.GroupFetchResponse
	err := c.do(ctx, "GroupFetch", retryAny, c.opts.Timeout+maxWait, func(ctx context.Context) error {
		resp, err := c.rpc.GroupFetch(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out = resp.Msg
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("group fetch %s/%d at %d: %w", req.Fetch.Topic, req.Fetch.Partition, req.Fetch.Offset, err)
	}
	return out, nil
}
