package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/replication"
)

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

// toConnectError maps an error from the layers below to a Connect error
// with an ErrorInfo detail, so every error a client can act on has its own
// reason. Errors already mapped pass through.
func toConnectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	if ge := groupConnectError(err); ge != nil {
		return ge
	}
	reason := func(r logdv1.Reason) *logdv1.ErrorInfo { return &logdv1.ErrorInfo{Reason: r} }
	var oor *log.OutOfRangeError
	var overloaded *replication.OverloadedError
	switch {
	case errors.As(err, &overloaded):
		after := overloaded.RetryAfter
		if after <= 0 {
			after = replication.DefaultOverloadRetryAfter
		}
		return withInfo(connect.CodeResourceExhausted, &logdv1.ErrorInfo{
			Reason: logdv1.Reason_REASON_OVERLOADED, RetryAfterMs: after.Milliseconds(),
		}, err)
	case errors.As(err, &oor):
		return withInfo(connect.CodeOutOfRange, &logdv1.ErrorInfo{
			Reason: logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE, LogStartOffset: oor.Start, EndOffset: oor.End,
		}, err)
	case errors.Is(err, replication.ErrUnknownTopic), errors.Is(err, log.ErrClosed):
		return withInfo(connect.CodeNotFound, reason(logdv1.Reason_REASON_UNKNOWN_TOPIC), err)
	case errors.Is(err, replication.ErrUnknownPartition):
		return withInfo(connect.CodeNotFound, reason(logdv1.Reason_REASON_UNKNOWN_PARTITION), err)
	case errors.Is(err, replication.ErrTopicExists):
		return withInfo(connect.CodeAlreadyExists, reason(logdv1.Reason_REASON_TOPIC_EXISTS), err)
	case errors.Is(err, replication.ErrRecordTooLarge), errors.Is(err, log.ErrBatchTooLarge):
		return withInfo(connect.CodeInvalidArgument, reason(logdv1.Reason_REASON_RECORD_TOO_LARGE), err)
	case errors.Is(err, replication.ErrInvalidArgument), errors.Is(err, replication.ErrInvalidConfig),
		errors.Is(err, partition.ErrInvalidTopicName), errors.Is(err, log.ErrInvalidBatch):
		return withInfo(connect.CodeInvalidArgument, reason(logdv1.Reason_REASON_INVALID_ARGUMENT), err)
	case errors.Is(err, dedup.ErrIdempotencyConflict):
		return withInfo(connect.CodeAlreadyExists, reason(logdv1.Reason_REASON_IDEMPOTENCY_CONFLICT), err)
	case queueError(err) != nil:
		return queueError(err)
	case errors.Is(err, replication.ErrUnknownNode):
		return withInfo(connect.CodeNotFound, reason(logdv1.Reason_REASON_INVALID_ARGUMENT), err)
	case errors.Is(err, replication.ErrNotLeader):
		return withInfo(connect.CodeUnavailable, reason(logdv1.Reason_REASON_NOT_LEADER), err)
	case errors.Is(err, replication.ErrTimeout):
		// The outcome is unknown: the write may still commit.
		return withInfo(connect.CodeDeadlineExceeded, reason(logdv1.Reason_REASON_UNAVAILABLE), err)
	case errors.Is(err, replication.ErrStopped), errors.Is(err, replication.ErrShutdown):
		return withInfo(connect.CodeUnavailable, reason(logdv1.Reason_REASON_UNAVAILABLE), err)
	case errors.Is(err, log.ErrCorrupt), errors.Is(err, errCorruptRead):
		return withInfo(connect.CodeDataLoss, reason(logdv1.Reason_REASON_STORAGE), err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return withInfo(connect.CodeInternal, reason(logdv1.Reason_REASON_STORAGE), err)
}
