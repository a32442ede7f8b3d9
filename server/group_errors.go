package server

import (
	"errors"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/group"
)

// groupConnectError maps consumer group errors to Connect errors with their
// reasons; it returns nil for any other error.
func groupConnectError(err error) error {
	reason := func(r logdv1.Reason) *logdv1.ErrorInfo { return &logdv1.ErrorInfo{Reason: r} }
	switch {
	case errors.Is(err, group.ErrStaleGeneration), errors.Is(err, group.ErrNotAssigned):
		return withInfo(connect.CodeFailedPrecondition, reason(logdv1.Reason_REASON_STALE_GENERATION), err)
	case errors.Is(err, group.ErrUnknownMember):
		return withInfo(connect.CodeFailedPrecondition, reason(logdv1.Reason_REASON_UNKNOWN_MEMBER), err)
	case errors.Is(err, group.ErrConsumerGroupNotFound):
		return withInfo(connect.CodeNotFound, reason(logdv1.Reason_REASON_UNKNOWN_GROUP), err)
	case errors.Is(err, group.ErrConsumerGroupNotEmpty):
		return withInfo(connect.CodeFailedPrecondition, reason(logdv1.Reason_REASON_GROUP_NOT_EMPTY), err)
	case errors.Is(err, group.ErrOffsetAboveEnd), errors.Is(err, group.ErrNoResetPolicy):
		return withInfo(connect.CodeOutOfRange, reason(logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE), err)
	case errors.Is(err, group.ErrUnknownGroupTopic):
		return withInfo(connect.CodeNotFound, reason(logdv1.Reason_REASON_UNKNOWN_TOPIC), err)
	case errors.Is(err, group.ErrInvalidGroupRequest):
		return withInfo(connect.CodeInvalidArgument, reason(logdv1.Reason_REASON_INVALID_ARGUMENT), err)
	}
	return nil
}
