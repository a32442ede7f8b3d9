package histcheck

import (
	"fmt"
	"math"
)

// Kind names what a call did. The JSON form of a history spells kinds as
// these strings, so a kind's name never changes.
type Kind string

// The kinds of a history, by workload.
const (
	// Append produces Value (with idempotency key Key, if set) to Topic
	// Partition; an ok append reports the Offset it got (Duplicate when the
	// server answered an earlier attempt's offset for Key).
	Append Kind = "append"
	// Read fetches the record at Offset of Topic Partition; an ok read
	// reports its Value, or OutOfRange when Offset >= End, and always End,
	// the partition's end offset the answer carried.
	Read Kind = "read"
	// Scan is a final read of every record of Topic Partition on one Node,
	// after the faults stopped and the cluster healed, in Records.
	Scan Kind = "scan"

	// Join is a consumer group member's join or heartbeat: an ok one reports
	// Member's Generation and the partitions it owns (Assigned).
	Join Kind = "join"
	// Commit commits Offset of Topic Partition for Group as Member at
	// Generation; a definite refusal for the generation is Failed with
	// Reason Fenced.
	Commit Kind = "commit"
	// FetchCommitted reads Group's committed Offset of Topic Partition
	// (NoOffset when nothing is committed).
	FetchCommitted Kind = "fetch_committed"
	// Reset is an operator reset of Group's offset of Topic Partition; an
	// ok reset reports the Offset it moved to (NoOffset when not known) and
	// the group's new Generation (0 when not known).
	Reset Kind = "reset"

	// Claim takes records of queue group Group on Topic under leases; an ok
	// claim reports them in Deliveries.
	Claim Kind = "claim"
	// Ack finishes the delivery Token of Topic Partition Offset; a stale
	// token is Failed with Reason Stale.
	Ack Kind = "ack"
	// Nack fails the delivery Token (Permanent: dead-letter at once); a
	// stale token is Failed with Reason Stale.
	Nack Kind = "nack"
	// Extend extends the lease of delivery Token; an ok extend reports the
	// new Deadline. A stale token is Failed with Reason Stale.
	Extend Kind = "extend"
	// QueueFinal is the final state of one record of queue group Group
	// (Topic Partition Offset), read after healing: State, and DeadLetters,
	// how many dead-letter records name it as their origin.
	QueueFinal Kind = "queue_final"

	// AddNode adds (or re-adds) node Target to the cluster.
	AddNode Kind = "add_node"
	// RemoveNode removes node Target; from the return of an ok removal
	// until a later AddNode of Target, Target must acknowledge nothing.
	RemoveNode Kind = "remove_node"
)

// Outcome is how a call ended, as the client saw it.
type Outcome string

const (
	// Pending: the call never ended (the run stopped first). Checkers treat
	// it as Unknown.
	Pending Outcome = ""
	// OK: the call succeeded and its outputs are set.
	OK Outcome = "ok"
	// Failed: the server guarantees the call changed nothing.
	Failed Outcome = "failed"
	// Unknown: the call may or may not have taken effect (a timeout, a
	// lost connection, a forward whose answer never came).
	Unknown Outcome = "unknown"
)

// Reason says why a Failed call was refused, where a checker cares.
type Reason string

const (
	// Fenced: a group commit refused for its generation.
	Fenced Reason = "fenced"
	// Stale: a queue ack, nack or extend refused for its token.
	Stale Reason = "stale"
)

// State is a queue record's final state.
type State string

const (
	// Acked: the record was acknowledged.
	Acked State = "acked"
	// DeadLettered: the record was moved to the dead-letter topic.
	DeadLettered State = "dead_lettered"
	// Unfinished: neither (still ready, in flight or backing off).
	Unfinished State = "unfinished"
)

// NoOffset is an offset that is not known or not there: a group with
// nothing committed, a reset whose target the client did not learn.
const NoOffset int64 = -1

// Infinity is the return time checkers give calls whose outcome is
// unknown: such a call may take effect at any time after it began.
const Infinity int64 = math.MaxInt64

// Op is one call a client made, with what it saw. Times are monotonic
// nanoseconds since the run's start (Recorder.Now). Which fields are set
// depends on Kind (see the Kind constants); the others stay zero.
type Op struct {
	// ID is unique in a history (the Recorder numbers calls from 0).
	ID int `json:"id"`
	// Kind is what the call did.
	Kind Kind `json:"kind"`
	// Client identifies the caller; one client makes one call at a time.
	Client int `json:"client"`
	// Node is the node the call went to ("" when the client picked it).
	Node string `json:"node,omitempty"`
	// Leader: the call asked for the leader's answer (a write, or a read
	// that must be linearizable); false marks a follower read, which may
	// trail.
	Leader bool `json:"leader,omitempty"`
	// Call and Return are when the call began and ended; Return is 0 while
	// pending.
	Call   int64 `json:"call"`
	Return int64 `json:"return,omitempty"`
	// Outcome is how the call ended; Reason and Err explain a failure.
	Outcome Outcome `json:"outcome,omitempty"`
	Reason  Reason  `json:"reason,omitempty"`
	Err     string  `json:"err,omitempty"`

	// Topic and Partition address every data and group call.
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition,omitempty"`
	// Offset: an append's answer; the offset a read, commit, ack, nack,
	// extend or queue_final is about; a fetch_committed's or reset's
	// answer (NoOffset when none or not known).
	Offset int64 `json:"offset,omitempty"`
	// Value: what an append sent or an ok read got.
	Value string `json:"value,omitempty"`
	// Key is an append's idempotency key ("" for none).
	Key string `json:"key,omitempty"`
	// Duplicate: an ok keyed append answered as a repeat of an earlier
	// one (for people reading a history: the checkers do not rely on it);
	// an ok ack answered as a repeat of an ack of the same token that was
	// applied earlier (the queue checker counts the delivery finished
	// from that earlier ack's call).
	Duplicate bool `json:"duplicate,omitempty"`
	// OutOfRange: an ok read found Offset >= End.
	OutOfRange bool `json:"out_of_range,omitempty"`
	// End is the partition's end offset an ok read's answer carried.
	End int64 `json:"end,omitempty"`
	// Records are a scan's records, in offset order.
	Records []Record `json:"records,omitempty"`

	// Group names a consumer group or queue group.
	Group string `json:"group,omitempty"`
	// Member is a consumer group member.
	Member string `json:"member,omitempty"`
	// Generation: the generation a commit or fetch_committed carried; the
	// one a join or reset got (0 when not known).
	Generation int64 `json:"generation,omitempty"`
	// Assigned are the partitions an ok join says Member owns.
	Assigned []TopicPartition `json:"assigned,omitempty"`

	// Deliveries are what an ok claim handed out.
	Deliveries []Delivery `json:"deliveries,omitempty"`
	// Token is the delivery an ack, nack or extend names.
	Token string `json:"token,omitempty"`
	// Permanent marks a nack that dead-letters at once.
	Permanent bool `json:"permanent,omitempty"`
	// Deadline is an ok extend's new lease deadline (history time).
	Deadline int64 `json:"deadline,omitempty"`
	// State and DeadLetters are a queue_final's answer.
	State       State `json:"state,omitempty"`
	DeadLetters int   `json:"dead_letters,omitempty"`

	// Target is the node an add_node or remove_node is about.
	Target string `json:"target,omitempty"`
}

// Record is one record a scan read. Checkers match records to appends
// by Value; Key (the record's key) is kept for people reading a history.
type Record struct {
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
	Key    string `json:"key,omitempty"`
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Delivery is one record a claim handed out under a lease.
type Delivery struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Token identifies the delivery (opaque to the checkers).
	Token string `json:"token"`
	// Count is the record's delivery count, 1 for the first delivery.
	Count int `json:"count"`
	// Deadline is the lease deadline in history time (convert the server's
	// wall-clock deadline with Recorder.At).
	Deadline int64 `json:"deadline"`
	// Revocable marks a lease the server may end before its deadline
	// without any call naming its token, so the client cannot know when
	// it ended: a Kafka share consumer's acquisition lock, released when
	// the connection of its share session closes, its member rejoins a
	// new leader, or its session times out. Such a lease is certainly
	// held only until the last ok ack, nack or extend of it began.
	Revocable bool `json:"revocable,omitempty"`
}

// open reports whether op may have taken effect without the client
// learning its result.
func (op *Op) open() bool { return op.Outcome == Unknown || op.Outcome == Pending }

// ret is the return time the checkers use: Infinity for an open call.
func (op *Op) ret() int64 {
	if op.open() {
		return Infinity
	}
	return op.Return
}

// String describes a call for a violation message.
func (op *Op) String() string {
	s := fmt.Sprintf("#%d c%d %s", op.ID, op.Client, op.Kind)
	if op.Node != "" {
		s += "@" + op.Node
	}
	switch op.Kind {
	case Append:
		s += fmt.Sprintf(" %s/%d %q", op.Topic, op.Partition, op.Value)
		if op.Key != "" {
			s += fmt.Sprintf(" key %q", op.Key)
		}
		if op.Outcome == OK {
			s += fmt.Sprintf(" -> %d", op.Offset)
		}
	case Read:
		s += fmt.Sprintf(" %s/%d@%d", op.Topic, op.Partition, op.Offset)
		if op.Outcome == OK {
			if op.OutOfRange {
				s += fmt.Sprintf(" -> out of range (end %d)", op.End)
			} else {
				s += fmt.Sprintf(" -> %q (end %d)", op.Value, op.End)
			}
		}
	case Commit:
		s += fmt.Sprintf(" %s %s/%d=%d gen %d by %s", op.Group, op.Topic, op.Partition, op.Offset, op.Generation, op.Member)
	case FetchCommitted:
		s += fmt.Sprintf(" %s %s/%d", op.Group, op.Topic, op.Partition)
		if op.Outcome == OK {
			s += fmt.Sprintf(" -> %d", op.Offset)
		}
	case Reset:
		s += fmt.Sprintf(" %s %s/%d -> %d gen %d", op.Group, op.Topic, op.Partition, op.Offset, op.Generation)
	case Join:
		s += fmt.Sprintf(" %s %s gen %d %v", op.Group, op.Member, op.Generation, op.Assigned)
	case Claim:
		s += fmt.Sprintf(" %s %s -> %d deliveries", op.Group, op.Topic, len(op.Deliveries))
	case Ack, Nack, Extend:
		s += fmt.Sprintf(" %s %s/%d@%d token %s", op.Group, op.Topic, op.Partition, op.Offset, op.Token)
	case QueueFinal:
		s += fmt.Sprintf(" %s %s/%d@%d %s dlq×%d", op.Group, op.Topic, op.Partition, op.Offset, op.State, op.DeadLetters)
	case AddNode, RemoveNode:
		s += " " + op.Target
	case Scan:
		s += fmt.Sprintf(" %s/%d: %d records", op.Topic, op.Partition, len(op.Records))
	}
	s += fmt.Sprintf(" [%d, ", op.Call)
	if op.open() {
		s += "∞)"
	} else {
		s += fmt.Sprintf("%d]", op.Return)
	}
	switch op.Outcome {
	case OK:
	case Pending:
		s += " pending"
	default:
		s += " " + string(op.Outcome)
		if op.Reason != "" {
			s += " (" + string(op.Reason) + ")"
		}
	}
	return s
}
