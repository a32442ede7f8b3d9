package replication

import (
	"errors"
	"fmt"
	"strings"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
)

// wireError is an error a node answers another's call with: the sentinel
// it matches, by name, and its text; the typed errors a caller acts on
// keep their fields. decode makes the caller's error, which errors.Is
// matches as the answering node's did.
type wireError struct {
	Code string `json:"code,omitempty"`
	Msg  string `json:"msg"`
	// Overloaded and Elsewhere are the typed errors' fields.
	Overloaded *backend.OverloadedError     `json:"overloaded,omitempty"`
	Elsewhere  *fsm.PartitionElsewhereError `json:"elsewhere,omitempty"`
	OutOfRange *backend.OutOfRangeError     `json:"out_of_range,omitempty"`
	Behind     *backend.BehindError         `json:"behind,omitempty"`
	// GroupElsewhere names a consumer group's home (groups_route.go).
	GroupElsewhere *fsm.GroupElsewhereError `json:"group_elsewhere,omitempty"`
}

// wireSentinels are the errors a call's answer names, by code. The code
// is the wire name: never rename one.
var wireSentinels = []struct {
	code string
	err  error
}{
	{"not_leader", backend.ErrNotLeader},
	{"shutdown", backend.ErrShutdown},
	{"timeout", backend.ErrTimeout},
	{"stopped", backend.ErrStopped},
	{"key_required", backend.ErrKeyRequired},
	{"unknown_topic", backend.ErrUnknownTopic},
	{"unknown_partition", backend.ErrUnknownPartition},
	{"invalid_argument", backend.ErrInvalidArgument},
	{"record_too_large", backend.ErrRecordTooLarge},
	{"dedup_race", backend.ErrDedupRace},
	{"feature_level", backend.ErrFeatureLevel},
	{"out_of_order_sequence", backend.ErrOutOfOrderSequence},
	{"invalid_producer_epoch", backend.ErrInvalidProducerEpoch},
	{"batch_too_large", backend.ErrBatchTooLarge},
	{"invalid_batch", backend.ErrInvalidBatch},
	{"idempotency_conflict", dedup.ErrIdempotencyConflict},
	{"invalid_topic_name", partition.ErrInvalidTopicName},
	{"queue_group_not_found", queue.ErrGroupNotFound},
	{"queue_group_exists", queue.ErrGroupExists},
	{"queue_invalid_config", queue.ErrInvalidConfig},
	{"queue_invalid_request", queue.ErrInvalidRequest},
	{"queue_bad_token", queue.ErrBadToken},
	{"queue_stale_token", queue.ErrStaleToken},
	{"queue_group_busy", queue.ErrGroupBusy},
	{"unknown_command", backend.ErrUnknownCommand},
	{"bad_command", backend.ErrBadCommand},
	// A node's answer budget had no room for a read it serves
	// (remote_answers.go); a queue's admission refusal travels as its
	// OverloadedError.
	{"overloaded", backend.ErrOverloaded},
	// Consumer groups in data groups (groups_route.go).
	{"group_stale_generation", group.ErrStaleGeneration},
	{"group_not_assigned", group.ErrNotAssigned},
	{"group_unknown_member", group.ErrUnknownMember},
	{"group_not_found", group.ErrConsumerGroupNotFound},
	{"group_not_empty", group.ErrConsumerGroupNotEmpty},
	{"group_offset_above_end", group.ErrOffsetAboveEnd},
	{"group_no_reset_policy", group.ErrNoResetPolicy},
	{"group_unknown_topic", group.ErrUnknownGroupTopic},
	{"group_invalid_request", group.ErrInvalidGroupRequest},
	{"partition_elsewhere", backend.ErrPartitionElsewhere},
}

// encodeWireError is err as a call's answer carries it.
func encodeWireError(err error) *wireError {
	w := &wireError{Msg: err.Error()}
	var over *backend.OverloadedError
	var else_ *fsm.PartitionElsewhereError
	var oor *backend.OutOfRangeError
	var behind *backend.BehindError
	var ge *fsm.GroupElsewhereError
	switch {
	case errors.As(err, &over):
		w.Overloaded = over
	case errors.As(err, &else_):
		w.Elsewhere = else_
	case errors.As(err, &oor):
		w.OutOfRange = oor
	case errors.As(err, &behind):
		w.Behind = behind
	case errors.As(err, &ge):
		w.GroupElsewhere = ge
	}
	for _, s := range wireSentinels {
		if errors.Is(err, s.err) {
			w.Code = s.code
			break
		}
	}
	return w
}

// decode is the caller's error for w.
func (w *wireError) decode() error {
	switch {
	case w.Overloaded != nil:
		return w.Overloaded
	case w.Elsewhere != nil:
		return w.Elsewhere
	case w.OutOfRange != nil:
		return w.OutOfRange
	case w.Behind != nil:
		return w.Behind
	case w.GroupElsewhere != nil:
		return w.GroupElsewhere
	}
	for _, s := range wireSentinels {
		if s.code == w.Code {
			return fmt.Errorf("%w%s", s.err, strings.TrimPrefix(w.Msg, s.err.Error()))
		}
	}
	return errors.New(w.Msg)
}
