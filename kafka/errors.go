package kafka

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/queue"
)

// Kafka error codes this front end answers with (the protocol's numbers).
const (
	errNone                       int16 = 0
	errUnknownServer              int16 = -1
	errOffsetOutOfRange           int16 = 1
	errCorruptMessage             int16 = 2
	errUnknownTopicOrPartition    int16 = 3
	errLeaderNotAvailable         int16 = 5
	errNotLeaderOrFollower        int16 = 6
	errRequestTimedOut            int16 = 7
	errMessageTooLarge            int16 = 10
	errInvalidTopic               int16 = 17
	errNotEnoughReplicas          int16 = 19
	errTopicAuthorizationFailed   int16 = 29
	errGroupAuthorizationFailed   int16 = 30
	errClusterAuthorizationFailed int16 = 31
	errInvalidRequiredAcks        int16 = 21
	errInvalidTimestamp           int16 = 32
	errUnsupportedSaslMechanism   int16 = 33
	errUnsupportedVersion         int16 = 35
	errTopicAlreadyExists         int16 = 36
	errInvalidPartitions          int16 = 37
	errInvalidReplicationFactor   int16 = 38
	errInvalidReplicaAssignment   int16 = 39
	errInvalidConfig              int16 = 40
	errNotController              int16 = 41
	errInvalidRequest             int16 = 42
	errPolicyViolation            int16 = 44
	errInvalidTxnState            int16 = 48
	errKafkaStorage               int16 = 56
	errUnknownProducerID          int16 = 59
	errFetchSessionIDNotFound     int16 = 70
	errUnsupportedCompression     int16 = 76
	errInvalidRecord              int16 = 87
	errUnknownTopicID             int16 = 100
)

// errorNames names the codes above for metrics and logs.
var errorNames = map[int16]string{
	errNone:                       "NONE",
	errUnknownServer:              "UNKNOWN_SERVER_ERROR",
	errOffsetOutOfRange:           "OFFSET_OUT_OF_RANGE",
	errCorruptMessage:             "CORRUPT_MESSAGE",
	errUnknownTopicOrPartition:    "UNKNOWN_TOPIC_OR_PARTITION",
	errLeaderNotAvailable:         "LEADER_NOT_AVAILABLE",
	errNotLeaderOrFollower:        "NOT_LEADER_OR_FOLLOWER",
	errRequestTimedOut:            "REQUEST_TIMED_OUT",
	errMessageTooLarge:            "MESSAGE_TOO_LARGE",
	errInvalidTopic:               "INVALID_TOPIC_EXCEPTION",
	errNotEnoughReplicas:          "NOT_ENOUGH_REPLICAS",
	errTopicAuthorizationFailed:   "TOPIC_AUTHORIZATION_FAILED",
	errGroupAuthorizationFailed:   "GROUP_AUTHORIZATION_FAILED",
	errClusterAuthorizationFailed: "CLUSTER_AUTHORIZATION_FAILED",
	errInvalidRequiredAcks:        "INVALID_REQUIRED_ACKS",
	errInvalidTimestamp:           "INVALID_TIMESTAMP",
	errUnsupportedSaslMechanism:   "UNSUPPORTED_SASL_MECHANISM",
	errUnsupportedVersion:         "UNSUPPORTED_VERSION",
	errTopicAlreadyExists:         "TOPIC_ALREADY_EXISTS",
	errInvalidPartitions:          "INVALID_PARTITIONS",
	errInvalidReplicationFactor:   "INVALID_REPLICATION_FACTOR",
	errInvalidReplicaAssignment:   "INVALID_REPLICA_ASSIGNMENT",
	errInvalidConfig:              "INVALID_CONFIG",
	errNotController:              "NOT_CONTROLLER",
	errInvalidRequest:             "INVALID_REQUEST",
	errPolicyViolation:            "POLICY_VIOLATION",
	errInvalidTxnState:            "INVALID_TXN_STATE",
	errKafkaStorage:               "KAFKA_STORAGE_ERROR",
	errUnknownProducerID:          "UNKNOWN_PRODUCER_ID",
	errOutOfOrderSequence:         "OUT_OF_ORDER_SEQUENCE_NUMBER",
	errCoordinatorLoadInProgress:  "COORDINATOR_LOAD_IN_PROGRESS",
	errInvalidProducerEpoch:       "INVALID_PRODUCER_EPOCH",
	errFetchSessionIDNotFound:     "FETCH_SESSION_ID_NOT_FOUND",
	errUnsupportedCompression:     "UNSUPPORTED_COMPRESSION_TYPE",
	errInvalidRecord:              "INVALID_RECORD",
	errUnknownTopicID:             "UNKNOWN_TOPIC_ID",
	errIllegalSaslState:           "ILLEGAL_SASL_STATE",
	errSaslAuthenticationFail:     "SASL_AUTHENTICATION_FAILED",
	errResourceNotFound:           "RESOURCE_NOT_FOUND",
	errDuplicateResource:          "DUPLICATE_RESOURCE",
	errUnacceptableCredential:     "UNACCEPTABLE_CREDENTIAL",
}

func errorName(code int16) string {
	if n, ok := errorNames[code]; ok {
		return n
	}
	if n, ok := groupErrorNames[code]; ok {
		return n
	}
	if n, ok := shareErrorNames[code]; ok {
		return n
	}
	return "OTHER"
}

// opKind is what a request does, which decides a few codes: a write that
// reaches a node that cannot propose is NOT_LEADER_OR_FOLLOWER for records
// (the client refreshes its metadata and goes to the partition leader) and
// NOT_CONTROLLER for topic administration (the client goes to the
// controller Metadata names, which is the Raft leader too).
type opKind int

const (
	opRecords opKind = iota
	opAdmin
)

// errorRow maps the backend errors that match one of errs (errors.Is) to a
// Kafka code.
type errorRow struct {
	errs []error
	code int16
}

// errorTable is the one mapping of backend errors to Kafka codes; the
// first row that matches wins, and an error no row matches is
// UNKNOWN_SERVER_ERROR. errors_test.go fails when a sentinel of the
// backend has no row. The codes of NOT_LEADER below are for records;
// codeFor turns them into NOT_CONTROLLER for administration.
var errorTable = []errorRow{
	// A change forwarded to the leader (forward.go) that its ACLs, newer
	// than this node's, refuse the principal.
	{errs: []error{ErrLeaderDenied}, code: errTopicAuthorizationFailed},
	// Admission control refused the append and nothing was written: a
	// code every Kafka client retries (NOT_ENOUGH_REPLICAS also means
	// "not written"), sent with throttle_time_ms (throttleFor).
	{errs: []error{backend.ErrOverloaded}, code: errNotEnoughReplicas},
	{errs: []error{backend.ErrOffsetOutOfRange}, code: errOffsetOutOfRange},
	// Queue groups, which serve share groups (docs/kafka.md, "Share
	// groups"): a group with records in flight is not empty, as Kafka
	// calls a share group with members; a token that is not the current
	// delivery's is an acknowledgement of a record not held.
	{errs: []error{queue.ErrGroupNotFound}, code: errGroupIDNotFound},
	{errs: []error{queue.ErrGroupBusy}, code: errNonEmptyGroup},
	{errs: []error{queue.ErrStaleToken, queue.ErrBadToken}, code: errInvalidRecordState},
	{errs: []error{queue.ErrInvalidConfig}, code: errInvalidConfig},
	{errs: []error{queue.ErrInvalidRequest, queue.ErrGroupExists}, code: errInvalidRequest},
	{errs: []error{backend.ErrUnknownTopic, backend.ErrLogClosed, backend.ErrUnknownPartition}, code: errUnknownTopicOrPartition},
	{errs: []error{backend.ErrTopicExists}, code: errTopicAlreadyExists},
	{errs: []error{backend.ErrRecordTooLarge, backend.ErrBatchTooLarge}, code: errMessageTooLarge},
	{errs: []error{partition.ErrInvalidTopicName}, code: errInvalidTopic},
	{errs: []error{backend.ErrInvalidConfig}, code: errInvalidConfig},
	{errs: []error{backend.ErrInvalidBatch}, code: errCorruptMessage},
	// A record without a key on a compacted topic, as Kafka answers it
	// (checkBatch refuses it per partition first; the backend refuses it
	// too, for a topic that became compacted meanwhile).
	{errs: []error{backend.ErrKeyRequired}, code: errInvalidRecord},
	// An idempotent producer's batch its partition's producer state
	// refuses, as Kafka's brokers answer it.
	{errs: []error{backend.ErrOutOfOrderSequence}, code: errOutOfOrderSequence},
	{errs: []error{backend.ErrInvalidProducerEpoch}, code: errInvalidProducerEpoch},
	// A growth of a topic's partitions to a smaller count, or past the
	// per-topic limit (before ErrInvalidArgument, which it also is).
	{errs: []error{backend.ErrPartitionCount}, code: errInvalidPartitions},
	{errs: []error{backend.ErrInvalidArgument, dedup.ErrIdempotencyConflict}, code: errInvalidRequest},
	// The cluster's topic quota: retrying does not help until topics are
	// deleted or the quota raised.
	{errs: []error{backend.ErrQuotaExceeded}, code: errPolicyViolation},
	// SCRAM credentials (user_scram.go answers a missing one per user).
	{errs: []error{backend.ErrUnknownSCRAM}, code: errResourceNotFound},
	{errs: []error{backend.ErrTooManySCRAM}, code: errPolicyViolation},
	// A command some member's build would not understand.
	{errs: []error{backend.ErrFeatureLevel}, code: errPolicyViolation},
	// A partition of a data group this node does not serve it from: the
	// client refreshes its metadata and goes to the partition's leader.
	// A consumer group in another data group than the one asked is
	// NOT_COORDINATOR for a group request (groupCode).
	{errs: []error{backend.ErrNotLeader, backend.ErrShutdown, backend.ErrBehind, backend.ErrPartitionElsewhere, backend.ErrGroupElsewhere}, code: errNotLeaderOrFollower},
	// The outcome is unknown: the write may still commit.
	{errs: []error{backend.ErrTimeout, context.DeadlineExceeded, context.Canceled}, code: errRequestTimedOut},
	{errs: []error{backend.ErrStopped, backend.ErrCorrupt}, code: errKafkaStorage},
	// Concurrent appends kept committing the same idempotency keys first
	// (Kafka appends carry none): nothing the client can do but retry.
	{errs: []error{backend.ErrDedupRace}, code: errUnknownServer},
}

// codeFor maps a backend error to a Kafka code for an operation of kind.
func codeFor(err error, kind opKind) int16 {
	if err == nil {
		return errNone
	}
	code := tableCode(err)
	if kind == opAdmin && code == errNotLeaderOrFollower {
		return errNotController
	}
	return code
}

// tableCode is the code of the first row of errorTable matching err.
func tableCode(err error) int16 {
	for _, row := range errorTable {
		for _, e := range row.errs {
			if errors.Is(err, e) {
				return row.code
			}
		}
	}
	return errUnknownServer
}

// throttleFor returns the throttle_time_ms to send with err: admission
// control's retry hint when it refused an append, else 0. Clients hold
// back their next request to the node for that long.
func throttleFor(err error) int32 {
	var oe *backend.OverloadedError
	if !errors.As(err, &oe) {
		return 0
	}
	after := oe.RetryAfter
	if after <= 0 {
		after = backend.DefaultOverloadRetryAfter
	}
	return int32(min(after, time.Minute).Milliseconds())
}

// packagePrefix matches the package names logd's errors begin with
// ("replication: invalid topic config").
var packagePrefix = regexp.MustCompile(`(^|: )(replication|fsm|group|queue|partition|batch|log|dedup|retention|auth): `)

// errorMessage is err's text as a Kafka error_message: without the Go
// package names its sentinels begin with, which mean nothing to a Kafka
// user ("invalid topic config: retention.ms: ..." rather than
// "replication: invalid topic config: retention.ms: ...").
func errorMessage(err error) string {
	return packagePrefix.ReplaceAllString(err.Error(), "$1")
}

// ErrLeaderDenied is what a Forwarder returns when the leader refused the
// principal the change: TOPIC_AUTHORIZATION_FAILED.
var ErrLeaderDenied = errors.New("kafka: the leader refused the principal")
