package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/queue"
)

// errorRow maps the backend errors that match one of errs (errors.Is) to a
// Connect code and an ErrorInfo reason; info, if set, adds the data of a
// typed error. A row without a reason sends no ErrorInfo.
type errorRow struct {
	errs   []error
	code   connect.Code
	reason logdv1.Reason
	info   func(err error, info *logdv1.ErrorInfo)
}

// errorTable is the one mapping of backend errors to what clients see, so
// every error a client can act on has its own reason. The first row that
// matches wins; an error no row matches is INTERNAL with REASON_STORAGE.
// errors_test.go fails when a sentinel of the backend has no row.
var errorTable = []errorRow{
	// Consumer groups: fencing, then the rest.
	{errs: []error{group.ErrStaleGeneration, group.ErrNotAssigned}, code: connect.CodeFailedPrecondition, reason: logdv1.Reason_REASON_STALE_GENERATION},
	{errs: []error{group.ErrUnknownMember}, code: connect.CodeFailedPrecondition, reason: logdv1.Reason_REASON_UNKNOWN_MEMBER},
	{errs: []error{group.ErrConsumerGroupNotFound}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_GROUP},
	{errs: []error{group.ErrConsumerGroupNotEmpty}, code: connect.CodeFailedPrecondition, reason: logdv1.Reason_REASON_GROUP_NOT_EMPTY},
	{errs: []error{group.ErrOffsetAboveEnd, group.ErrNoResetPolicy}, code: connect.CodeOutOfRange, reason: logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE},
	{errs: []error{group.ErrUnknownGroupTopic}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_TOPIC},
	{errs: []error{group.ErrInvalidGroupRequest}, code: connect.CodeInvalidArgument, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},

	// Records and topics.
	{errs: []error{backend.ErrOverloaded}, code: connect.CodeResourceExhausted, reason: logdv1.Reason_REASON_OVERLOADED, info: overloadedInfo},
	{errs: []error{backend.ErrOffsetOutOfRange}, code: connect.CodeOutOfRange, reason: logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE, info: outOfRangeInfo},
	{errs: []error{backend.ErrUnknownTopic, backend.ErrLogClosed}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_TOPIC},
	{errs: []error{backend.ErrUnknownPartition}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_PARTITION},
	// A partition of a data group this node cannot serve the request
	// from: not retryable here (FAILED_PRECONDITION); the text names the
	// group.
	{errs: []error{backend.ErrPartitionElsewhere, backend.ErrNodeHoldsReplicas, backend.ErrBackupDataGroups}, code: connect.CodeFailedPrecondition},
	{errs: []error{backend.ErrTopicExists}, code: connect.CodeAlreadyExists, reason: logdv1.Reason_REASON_TOPIC_EXISTS},
	{errs: []error{backend.ErrRecordTooLarge, backend.ErrBatchTooLarge}, code: connect.CodeInvalidArgument, reason: logdv1.Reason_REASON_RECORD_TOO_LARGE},
	{errs: []error{backend.ErrInvalidArgument, backend.ErrInvalidConfig, partition.ErrInvalidTopicName, backend.ErrInvalidBatch, backend.ErrPartitionCount,
		backend.ErrKeyRequired},
		code: connect.CodeInvalidArgument, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},
	{errs: []error{dedup.ErrIdempotencyConflict}, code: connect.CodeAlreadyExists, reason: logdv1.Reason_REASON_IDEMPOTENCY_CONFLICT},
	// A producer's batch out of sequence: ABORTED, gRPC's code for a
	// failed sequencer check; the producer sends again in order, so the
	// client does not repeat the call by itself. A fenced epoch is the
	// producer's own state going stale, as a group's generation does.
	{errs: []error{backend.ErrOutOfOrderSequence}, code: connect.CodeAborted, reason: logdv1.Reason_REASON_OUT_OF_ORDER_SEQUENCE},
	{errs: []error{backend.ErrInvalidProducerEpoch}, code: connect.CodeFailedPrecondition, reason: logdv1.Reason_REASON_INVALID_PRODUCER_EPOCH},
	// A cluster quota: RESOURCE_EXHAUSTED, as gRPC names quotas, but with
	// INVALID_ARGUMENT as its reason, since retrying does not help until
	// topics are deleted or the quota raised (OVERLOADED would be retried).
	{errs: []error{backend.ErrQuotaExceeded}, code: connect.CodeResourceExhausted, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},

	// Tokens and ACLs. Their bounds are quotas, as the cluster's is.
	{errs: []error{backend.ErrUnknownToken}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_TOKEN},
	{errs: []error{backend.ErrUnknownRedrive}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_REDRIVE},
	{errs: []error{backend.ErrTokenExists}, code: connect.CodeAlreadyExists, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},
	{errs: []error{backend.ErrTooManyTokens, backend.ErrTooManyACLs, backend.ErrTooManySCRAM}, code: connect.CodeResourceExhausted, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},
	{errs: []error{backend.ErrUnknownSCRAM}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_SCRAM_CREDENTIAL},

	// Queue groups.
	{errs: []error{queue.ErrGroupNotFound}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_UNKNOWN_QUEUE_GROUP},
	{errs: []error{queue.ErrGroupExists}, code: connect.CodeAlreadyExists, reason: logdv1.Reason_REASON_QUEUE_GROUP_EXISTS},
	{errs: []error{queue.ErrInvalidConfig, queue.ErrInvalidRequest, queue.ErrBadToken}, code: connect.CodeInvalidArgument, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},
	{errs: []error{queue.ErrStaleToken}, code: connect.CodeFailedPrecondition, reason: logdv1.Reason_REASON_STALE_TOKEN},
	// A queue group with records in flight cannot have its start moved or
	// be deleted, as a consumer group with members cannot be deleted.
	{errs: []error{queue.ErrGroupBusy}, code: connect.CodeFailedPrecondition, reason: logdv1.Reason_REASON_GROUP_NOT_EMPTY},

	// The cluster and the node.
	{errs: []error{backend.ErrUnknownNode}, code: connect.CodeNotFound, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},
	// Membership changes: one at a time, so another in progress is a
	// conflict worth retrying (ABORTED, retryable by its reason); a joining
	// node that does not answer as itself, or clashes with a member, is not
	// (the joining node's own loop retries anyway); too few voters
	// answering is retryable once they do.
	{errs: []error{backend.ErrMembershipChange}, code: connect.CodeAborted, reason: logdv1.Reason_REASON_UNAVAILABLE, info: membershipRetryInfo},
	{errs: []error{backend.ErrNodeUnreachable, backend.ErrNodeConflict}, code: connect.CodeFailedPrecondition},
	{errs: []error{backend.ErrNoQuorum}, code: connect.CodeUnavailable, reason: logdv1.Reason_REASON_UNAVAILABLE},
	// A node-to-node call under peer TLS from a caller that did not prove
	// the node identity it needs (a join by anyone but the node itself).
	{errs: []error{peer.ErrIdentity}, code: connect.CodePermissionDenied, reason: logdv1.Reason_REASON_PERMISSION_DENIED},
	// A consumer group command that reached a Raft group other than the
	// group's home (a node routed by a placement it had not applied):
	// retried, as after NOT_LEADER.
	{errs: []error{backend.ErrNotLeader, backend.ErrGroupElsewhere}, code: connect.CodeUnavailable, reason: logdv1.Reason_REASON_NOT_LEADER},
	// A follower behind what the client learnt from the leader: the client
	// moves to the leader, as after NOT_LEADER, and reads there.
	{errs: []error{backend.ErrBehind}, code: connect.CodeUnavailable, reason: logdv1.Reason_REASON_NOT_LEADER, info: behindInfo},
	// A command some member's build would not understand: retrying cannot
	// help until every node is upgraded, and the text says so
	// (*FeatureLevelError). No reason fits, so no ErrorInfo.
	{errs: []error{backend.ErrFeatureLevel}, code: connect.CodeFailedPrecondition},
	// The outcome is unknown: the write may still commit.
	{errs: []error{backend.ErrTimeout}, code: connect.CodeDeadlineExceeded, reason: logdv1.Reason_REASON_UNAVAILABLE},
	{errs: []error{backend.ErrStopped, backend.ErrShutdown}, code: connect.CodeUnavailable, reason: logdv1.Reason_REASON_UNAVAILABLE},
	{errs: []error{backend.ErrCorrupt, errCorruptRead}, code: connect.CodeDataLoss, reason: logdv1.Reason_REASON_STORAGE},
	// Concurrent produce calls kept committing the same idempotency keys
	// first: nothing a client can do but retry later.
	{errs: []error{backend.ErrDedupRace}, code: connect.CodeInternal, reason: logdv1.Reason_REASON_STORAGE},

	// The caller's context.
	{errs: []error{context.Canceled}, code: connect.CodeCanceled},
	{errs: []error{context.DeadlineExceeded}, code: connect.CodeDeadlineExceeded},
}

func overloadedInfo(err error, info *logdv1.ErrorInfo) {
	after := backend.DefaultOverloadRetryAfter
	var oe *backend.OverloadedError
	if errors.As(err, &oe) && oe.RetryAfter > 0 {
		after = oe.RetryAfter
	}
	info.RetryAfterMs = after.Milliseconds()
}

func behindInfo(err error, info *logdv1.ErrorInfo) {
	var be *backend.BehindError
	if errors.As(err, &be) {
		info.LeaderAddress = be.LeaderAddress
	}
}

// membershipRetryAfter is the pause a refused membership change suggests:
// the change in progress usually ends within it, unless a joining node
// is catching up.
const membershipRetryAfter = time.Second

func membershipRetryInfo(_ error, info *logdv1.ErrorInfo) {
	info.RetryAfterMs = membershipRetryAfter.Milliseconds()
}

func outOfRangeInfo(err error, info *logdv1.ErrorInfo) {
	var oor *backend.OutOfRangeError
	if errors.As(err, &oor) {
		info.LogStartOffset, info.EndOffset = oor.Start, oor.End
	}
}

// rowFor returns the first row of errorTable matching err, or nil.
func rowFor(err error) *errorRow {
	for i := range errorTable {
		for _, e := range errorTable[i].errs {
			if errors.Is(err, e) {
				return &errorTable[i]
			}
		}
	}
	return nil
}

// toConnectError maps an error from the backend to a Connect error with an
// ErrorInfo detail (errorTable). Errors already mapped pass through.
func toConnectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	row := rowFor(err)
	if row == nil {
		return withInfo(connect.CodeInternal, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_STORAGE}, newUserError(err))
	}
	if row.reason == logdv1.Reason_REASON_UNSPECIFIED {
		return connect.NewError(row.code, newUserError(err))
	}
	info := &logdv1.ErrorInfo{Reason: row.reason}
	if row.info != nil {
		row.info(err, info)
	}
	return withInfo(row.code, info, newUserError(err))
}

// packagePrefix matches the "package: " prefixes the backend's sentinels
// carry ("replication: unknown topic"), at the start of an error text or
// of a wrapped part of it. They say where an error came from, which the
// node's log needs and a user of the API does not: "create topic "x":
// replication: invalid argument: partition: invalid topic name" reaches
// the user as "create topic "x": invalid argument: invalid topic name".
var packagePrefix = regexp.MustCompile(`(^|: )(replication|partition|log|group|queue|batch|dedup|retention|fsm|auth|raft): `)

// userError is what the API sends for a backend error: its text without
// package prefixes. Unwrap keeps the wrapped error for errors.Is and for
// the node's own log (errorLogInterceptor, the audit log).
type userError struct {
	msg     string
	wrapped error
}

func newUserError(err error) *userError {
	msg := err.Error()
	for {
		clean := packagePrefix.ReplaceAllString(msg, "$1")
		if clean == msg {
			break
		}
		msg = clean
	}
	return &userError{msg: msg, wrapped: err}
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.wrapped }

// logText is the text of err for the node's log: the wrapped backend error
// with its package prefixes where there is one.
func logText(err error) string {
	var ue *userError
	if errors.As(err, &ue) {
		return ue.wrapped.Error()
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// errorLogInterceptor logs calls that failed: at WARN those that failed
// inside the node (INTERNAL, DATA_LOSS, UNKNOWN: what an operator must
// look at), at DEBUG the rest (a client's mistake or a retryable
// refusal), each with the wrapped error the client does not see.
func (s *Server) errorLogInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			if err == nil {
				return resp, nil
			}
			level := slog.LevelDebug
			switch connect.CodeOf(err) {
			case connect.CodeInternal, connect.CodeDataLoss, connect.CodeUnknown:
				level = slog.LevelWarn
			}
			s.logger.Log(ctx, level, "call failed", "procedure", req.Spec().Procedure, "code", connect.CodeOf(err).String(), "error", logText(err))
			return resp, err
		}
	}
}

// errInvalid builds an INVALID_ARGUMENT error for request validation.
func errInvalid(format string, args ...any) error {
	return withInfo(connect.CodeInvalidArgument, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_INVALID_ARGUMENT}, fmt.Errorf(format, args...))
}

func withInfo(code connect.Code, info *logdv1.ErrorInfo, err error) error {
	ce := connect.NewError(code, err)
	if d, derr := connect.NewErrorDetail(info); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}
