package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Sentinel errors, one per reason a server gives (logdv1.Reason). Every error
// a call returns for a server-side failure wraps exactly one of them, so
// callers test with errors.Is; the error's text is the server's message.
// Errors that carry data are the types below (OutOfRangeError,
// OverloadedError, NotLeaderError); they match their sentinel with errors.Is
// too. All of them also unwrap to the underlying *connect.Error, so
// connect.CodeOf works.
var (
	// ErrInvalidArgument: the request was malformed (bad name, bad config, ...).
	ErrInvalidArgument = errors.New("logd: invalid argument")
	// ErrUnknownTopic: the topic does not exist.
	ErrUnknownTopic = errors.New("logd: unknown topic")
	// ErrTopicExists: CreateTopic of a topic that already exists.
	ErrTopicExists = errors.New("logd: topic exists")
	// ErrUnknownPartition: the topic has no such partition.
	ErrUnknownPartition = errors.New("logd: unknown partition")
	// ErrOffsetOutOfRange: a fetch offset outside [log start, end]; see
	// OutOfRangeError for the bounds.
	ErrOffsetOutOfRange = errors.New("logd: offset out of range")
	// ErrRecordTooLarge: a record or batch exceeds the topic's limit.
	ErrRecordTooLarge = errors.New("logd: record too large")
	// ErrNotLeader: the node could not reach a leader for a write. Nothing
	// was written; the call is safe to retry. See NotLeaderError.
	ErrNotLeader = errors.New("logd: not leader")
	// ErrOverloaded: admission control refused the call before writing
	// anything; retry after OverloadedError.RetryAfter.
	ErrOverloaded = errors.New("logd: overloaded")
	// ErrUnavailable: the node or cluster cannot serve the call now (no
	// quorum, shutting down, connection failed). A write that failed with it
	// may or may not have been applied (unless the connection could not be
	// made), and its error is then also ErrOutcomeUnknown.
	ErrUnavailable = errors.New("logd: unavailable")
	// ErrStaleToken: a queue operation carried the token of an older
	// delivery or of an expired lease.
	ErrStaleToken = errors.New("logd: stale delivery token")
	// ErrIdempotencyConflict: an idempotency key was reused with a
	// different payload inside the topic's window.
	ErrIdempotencyConflict = errors.New("logd: idempotency conflict")
	// ErrStorage: the server hit a storage error.
	ErrStorage = errors.New("logd: storage error")
	// ErrOutOfOrderSequence: a produce with a producer identity (the
	// Producer's, when it pipelines) whose batch does not follow the
	// producer's last on its partition: an earlier batch is missing or
	// not written yet. Nothing of that partition was written; the
	// Producer sends its batches again in order.
	ErrOutOfOrderSequence = errors.New("logd: out of order sequence")
	// ErrInvalidProducerEpoch: a produce with a producer identity whose
	// epoch is below the one its partition last saw from that producer:
	// it was fenced, and nothing of that partition was written.
	ErrInvalidProducerEpoch = errors.New("logd: invalid producer epoch")
	// ErrOutcomeUnknown: a write failed in a way that leaves open whether
	// it was applied (a lost reply, a timeout, a node that went away during
	// the call), and no later attempt settled it.
	ErrOutcomeUnknown = errors.New("logd: outcome unknown")

	// Consumer groups.

	// ErrStaleGeneration: a group member's commit or fetch named a generation
	// older than its ownership of the partition (moved, or offsets reset);
	// refresh the assignment and restart from the committed offset.
	ErrStaleGeneration = errors.New("logd: stale group generation")
	// ErrUnknownMember: the member left or missed its session timeout; join
	// again.
	ErrUnknownMember = errors.New("logd: unknown group member")
	// ErrUnknownGroup: the consumer group does not exist.
	ErrUnknownGroup = errors.New("logd: unknown consumer group")
	// ErrGroupNotEmpty: the consumer group has live members (delete).
	ErrGroupNotEmpty = errors.New("logd: consumer group not empty")

	// Security (docs/security.md). Neither is ever retried: the same
	// credentials get the same answer.

	// ErrUnauthenticated: the call carried no credentials where the server
	// requires them, or a bad, expired or revoked token. See AuthError.
	ErrUnauthenticated = errors.New("logd: unauthenticated")
	// ErrPermissionDenied: the caller's principal lacks a permission the
	// call needs; AuthError names it.
	ErrPermissionDenied = errors.New("logd: permission denied")
	// ErrUnknownToken: no token has that id (RevokeToken).
	ErrUnknownToken = errors.New("logd: unknown token")
	// ErrUnknownSCRAMCredential: the user holds no SCRAM credential of
	// that mechanism (DeleteSCRAMCredential).
	ErrUnknownSCRAMCredential = errors.New("logd: unknown SCRAM credential")
	// ErrUnknownRedrive: no redrive job has that id (DescribeRedrive,
	// StopRedrive).
	ErrUnknownRedrive = errors.New("logd: unknown redrive job")
)

// AuthError reports a call the server refused for who made it:
// errors.Is(err, ErrUnauthenticated) when the credentials were missing or
// not accepted, errors.Is(err, ErrPermissionDenied) when the principal
// lacks a permission. Nothing was applied, and the call is not retried.
type AuthError struct {
	// Unauthenticated is true for a refusal of the credentials
	// (ErrUnauthenticated), false for a missing permission
	// (ErrPermissionDenied).
	Unauthenticated bool
	// Permission is the permission the call lacked, as the server writes
	// it ("write topic orders"): the operation, the resource type and the
	// resource name. Empty for ErrUnauthenticated, and when the server
	// did not say.
	Permission string
	// Principal is who the server checked the permission for
	// ("User:alice"). Empty when the server did not say.
	Principal string
	// TLS is true when the refusal came at the TLS layer: the server
	// requires a client certificate before it reads any token.
	TLS bool

	msg   string
	cause error
}

// Error says what was refused: `permission denied: User:alice lacks
// "write topic orders"`, or "not authenticated: " and the server's
// message.
func (e *AuthError) Error() string {
	if e.Unauthenticated {
		if e.msg == "" {
			return "not authenticated"
		}
		return "not authenticated: " + e.msg
	}
	switch {
	case e.Permission != "" && e.Principal != "":
		return fmt.Sprintf("permission denied: %s lacks %q", e.Principal, e.Permission)
	case e.Permission != "":
		return fmt.Sprintf("permission denied: lacks %q", e.Permission)
	case e.msg != "":
		return "permission denied: " + e.msg
	}
	return "permission denied"
}

// Is makes errors.Is(err, ErrUnauthenticated) or errors.Is(err,
// ErrPermissionDenied) true, whichever the refusal was.
func (e *AuthError) Is(target error) bool {
	if e.Unauthenticated {
		return target == ErrUnauthenticated
	}
	return target == ErrPermissionDenied
}

// Unwrap returns the underlying *connect.Error.
func (e *AuthError) Unwrap() error { return e.cause }

// OutOfRangeError reports a fetch offset outside the partition's readable
// range [LogStart, End]. errors.Is(err, ErrOffsetOutOfRange) holds.
type OutOfRangeError struct {
	// Offset is the offset that was asked for (-1 when unknown).
	Offset int64
	// LogStart is the partition's first readable offset.
	LogStart int64
	// End is the partition's end offset (the next offset to be written).
	End int64

	msg   string
	cause error
}

func (e *OutOfRangeError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("offset %d out of range [%d, %d]", e.Offset, e.LogStart, e.End)
}

// Is makes errors.Is(err, ErrOffsetOutOfRange) true.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// Unwrap returns the underlying *connect.Error.
func (e *OutOfRangeError) Unwrap() error { return e.cause }

// OverloadedError reports that the server refused a call under admission
// control; nothing was written. errors.Is(err, ErrOverloaded) holds.
type OverloadedError struct {
	// RetryAfter is how long the server asks the client to wait (0 if it
	// gave no hint).
	RetryAfter time.Duration

	msg   string
	cause error
}

func (e *OverloadedError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("overloaded, retry after %v", e.RetryAfter)
}

// Is makes errors.Is(err, ErrOverloaded) true.
func (e *OverloadedError) Is(target error) bool { return target == ErrOverloaded }

// Unwrap returns the underlying *connect.Error.
func (e *OverloadedError) Unwrap() error { return e.cause }

// NotLeaderError reports that the node could not get a write to a leader;
// nothing was written. errors.Is(err, ErrNotLeader) holds.
type NotLeaderError struct {
	// LeaderAddress is the leader's client address when the node knows it.
	LeaderAddress string

	msg   string
	cause error
}

func (e *NotLeaderError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	if e.LeaderAddress != "" {
		return "not leader; leader is " + e.LeaderAddress
	}
	return "not leader"
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Unwrap returns the underlying *connect.Error.
func (e *NotLeaderError) Unwrap() error { return e.cause }

// OutcomeUnknownError is the error of a write that may or may not have
// been applied: an attempt failed after its request may have reached the
// server (a lost reply, a timeout, UNAVAILABLE from a node that forwarded
// it), and no later attempt settled the question by succeeding. Later
// attempts that failed, even with errors proving that they themselves
// wrote nothing (ErrNotLeader, a refused connection), do not make the
// first one unwritten. errors.Is(err, ErrOutcomeUnknown) holds, and it
// takes precedence over what the wrapped errors say: they are the last
// attempt's failure (Err) and the failure that left the outcome open
// (Cause), kept for their text and for errors.Is and errors.As.
//
// A write with an idempotency key may be sent again as it was: it returns
// the original offsets if the first one was applied. Without a key, read
// the log before writing again.
type OutcomeUnknownError struct {
	// Attempt is the attempt (from 1) whose outcome is unknown, the first
	// one if several were.
	Attempt int
	// Attempts is the number of attempts made.
	Attempts int
	// Cause is the failure of attempt Attempt.
	Cause error
	// Err is the failure of the last attempt (Cause when that was the
	// last), possibly with ErrRetryBudgetExhausted.
	Err error
}

func (e *OutcomeUnknownError) Error() string {
	if e.Attempts <= 1 || e.Cause == e.Err {
		return fmt.Sprintf("outcome unknown, the write may or may not have been applied: %v", e.Err)
	}
	return fmt.Sprintf("outcome unknown, the write may or may not have been applied: attempt %d of %d failed with %q; the last failed with: %v",
		e.Attempt, e.Attempts, e.Cause.Error(), e.Err)
}

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns the last attempt's error and, when it differs, the error
// that left the outcome open.
func (e *OutcomeUnknownError) Unwrap() []error {
	if e.Cause == nil || e.Cause == e.Err {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// serverError is a failure without data: a sentinel plus the server's text.
type serverError struct {
	sentinel error
	msg      string
	cause    error
}

func (e *serverError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.sentinel.Error()
}

func (e *serverError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// ReasonOf names the server's reason for err: its logdv1.Reason without
// the REASON_ prefix, such as "OVERLOADED" or "UNKNOWN_TOPIC", for scripts
// that branch on it; "" for an error that carries no server reason.
func ReasonOf(err error) string {
	values := slices.Sorted(maps.Keys(logdv1.Reason_name))
	for _, v := range values {
		if s := reasonSentinel(logdv1.Reason(v)); s != nil && errors.Is(err, s) {
			return strings.TrimPrefix(logdv1.Reason_name[v], "REASON_")
		}
	}
	return ""
}

// reasonSentinel maps a server Reason to its sentinel (nil if unknown).
func reasonSentinel(r logdv1.Reason) error {
	switch r {
	case logdv1.Reason_REASON_INVALID_ARGUMENT:
		return ErrInvalidArgument
	case logdv1.Reason_REASON_UNKNOWN_TOPIC:
		return ErrUnknownTopic
	case logdv1.Reason_REASON_TOPIC_EXISTS:
		return ErrTopicExists
	case logdv1.Reason_REASON_UNKNOWN_PARTITION:
		return ErrUnknownPartition
	case logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE:
		return ErrOffsetOutOfRange
	case logdv1.Reason_REASON_RECORD_TOO_LARGE:
		return ErrRecordTooLarge
	case logdv1.Reason_REASON_NOT_LEADER:
		return ErrNotLeader
	case logdv1.Reason_REASON_OVERLOADED:
		return ErrOverloaded
	case logdv1.Reason_REASON_UNAVAILABLE:
		return ErrUnavailable
	case logdv1.Reason_REASON_STALE_TOKEN:
		return ErrStaleToken
	case logdv1.Reason_REASON_IDEMPOTENCY_CONFLICT:
		return ErrIdempotencyConflict
	case logdv1.Reason_REASON_STORAGE:
		return ErrStorage
	case logdv1.Reason_REASON_OUT_OF_ORDER_SEQUENCE:
		return ErrOutOfOrderSequence
	case logdv1.Reason_REASON_INVALID_PRODUCER_EPOCH:
		return ErrInvalidProducerEpoch
	case logdv1.Reason_REASON_STALE_GENERATION:
		return ErrStaleGeneration
	case logdv1.Reason_REASON_UNKNOWN_MEMBER:
		return ErrUnknownMember
	case logdv1.Reason_REASON_UNKNOWN_GROUP:
		return ErrUnknownGroup
	case logdv1.Reason_REASON_GROUP_NOT_EMPTY:
		return ErrGroupNotEmpty
	case logdv1.Reason_REASON_UNKNOWN_QUEUE_GROUP:
		return ErrUnknownQueueGroup
	case logdv1.Reason_REASON_QUEUE_GROUP_EXISTS:
		return ErrQueueGroupExists
	case logdv1.Reason_REASON_UNAUTHENTICATED:
		return ErrUnauthenticated
	case logdv1.Reason_REASON_PERMISSION_DENIED:
		return ErrPermissionDenied
	case logdv1.Reason_REASON_UNKNOWN_TOKEN:
		return ErrUnknownToken
	case logdv1.Reason_REASON_UNKNOWN_SCRAM_CREDENTIAL:
		return ErrUnknownSCRAMCredential
	case logdv1.Reason_REASON_UNKNOWN_REDRIVE:
		return ErrUnknownRedrive
	}
	return nil
}

// codeSentinel maps a status code to a sentinel when the server attached no
// ErrorInfo (a proxy, an older server, or a connection failure). Only codes
// that name one reason unambiguously are mapped.
func codeSentinel(c connect.Code) error {
	switch c {
	case connect.CodeUnavailable:
		return ErrUnavailable
	case connect.CodeResourceExhausted:
		return ErrOverloaded
	case connect.CodeAlreadyExists:
		return ErrTopicExists
	case connect.CodeUnauthenticated:
		return ErrUnauthenticated
	case connect.CodePermissionDenied:
		return ErrPermissionDenied
	}
	return nil
}

// errorInfo returns the ErrorInfo detail of a connect error, if any.
func errorInfo(ce *connect.Error) *logdv1.ErrorInfo {
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		if info, ok := v.(*logdv1.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// fromRPC turns an error of a generated-client call into the client's error
// scheme. Context errors and errors without a *connect.Error pass through
// unchanged (connect keeps context.Canceled/DeadlineExceeded in the chain).
func fromRPC(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	if _, refused := tlsFailure(err); refused {
		return &AuthError{Unauthenticated: true, TLS: true, msg: "the server refused the TLS client certificate: " + ce.Message(), cause: ce}
	}
	msg := ce.Message()
	info := errorInfo(ce)
	var sentinel error
	if info != nil {
		sentinel = reasonSentinel(info.GetReason())
	}
	if sentinel == nil {
		sentinel = codeSentinel(ce.Code())
	}
	switch sentinel {
	case nil:
		return err
	case ErrOffsetOutOfRange:
		e := &OutOfRangeError{Offset: -1, msg: msg, cause: ce}
		if info != nil {
			e.LogStart, e.End = info.GetLogStartOffset(), info.GetEndOffset()
		}
		return e
	case ErrOverloaded:
		e := &OverloadedError{msg: msg, cause: ce}
		if info != nil {
			e.RetryAfter = time.Duration(info.GetRetryAfterMs()) * time.Millisecond
		}
		return e
	case ErrNotLeader:
		return &NotLeaderError{LeaderAddress: info.GetLeaderAddress(), msg: msg, cause: ce}
	case ErrUnauthenticated, ErrPermissionDenied:
		return &AuthError{Unauthenticated: sentinel == ErrUnauthenticated, Permission: info.GetPermission(), Principal: info.GetPrincipal(), msg: msg, cause: ce}
	}
	return &serverError{sentinel: sentinel, msg: msg, cause: ce}
}

// IsRetryable reports whether a call that failed with err may succeed if
// repeated later: not leader, unavailable (including failed connections),
// overloaded, and per-attempt deadlines. It says nothing about whether a
// write is safe to repeat; see Client.Produce for that, and test
// ErrOutcomeUnknown first: such an error may wrap a retryable last
// attempt although an earlier one may have written.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrUnauthenticated), errors.Is(err, ErrPermissionDenied), errors.Is(err, ErrTokenSource):
		// The same credentials get the same answer; a token source's
		// failure (whatever it wraps) says nothing about the node.
		return false
	case tlsFailed(err):
		// A certificate one side does not accept stays unaccepted.
		return false
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrUnavailable), errors.Is(err, ErrOverloaded):
		return true
	case errors.Is(err, context.DeadlineExceeded):
		return true
	case connLost(err):
		return true
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		return true
	}
	return false
}

// connLost reports whether err is a broken connection (reset, closed
// mid-reply): the server may or may not have acted, and it may be back
// soon. Connect reports some of these as CodeCanceled even though the
// caller's context is alive.
func connLost(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// tlsFailure reports whether err is a failed TLS handshake (failed), and
// whether it is the server refusing the client's certificate or its lack
// of one (certRefused). A handshake that failed reached no handler, so
// nothing was applied. The server's refusal arrives as an alert, which
// crypto/tls reports as a "remote error" whose text names it; the alerts
// about certificates (bad, unsupported, revoked, expired, unknown,
// unknown authority, required) and "access denied" count as refusals.
func tlsFailure(err error) (failed, certRefused bool) {
	var cve *tls.CertificateVerificationError
	var alert tls.AlertError
	var hostErr x509.HostnameError
	var authErr x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &cve) || errors.As(err, &alert) || errors.As(err, &hostErr) || errors.As(err, &authErr) || errors.As(err, &invalid) {
		return true, false // this side refused the server's certificate, or the handshake
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		if msg := op.Err.Error(); strings.HasPrefix(msg, "tls: ") {
			return true, strings.Contains(msg, "certificate") || msg == "tls: access denied"
		}
	}
	return false, false
}

// tlsFailed reports whether err is a failed TLS handshake.
func tlsFailed(err error) bool {
	failed, _ := tlsFailure(err)
	return failed
}

// notSent reports whether err proves that a request never completely
// reached the server, so even a write may be repeated without risk of
// duplication: the connection could not be made; the HTTP/2 transport
// found a new connection closed before the request's first use of it; or
// writing the request failed (the call's own error, so it came before any
// answer), so the server never read its end, and Connect and gRPC
// handlers run only on a whole unary request. A connection lost while
// waiting for the answer is not proof: the request may have been read.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "write") || anyInChain(err, isConnNotEstablished)
}

// connNotEstablished is the text of net/http's (unexported) HTTP/2 error
// for a request that was to be the first on a new connection that closed
// before it could be sent: the transport does not send it anywhere else.
// A server that refuses a client certificate after a TLS 1.3 handshake
// closes the connection that way.
const connNotEstablished = "http2: client conn could not be established"

func isConnNotEstablished(err error) bool { return err.Error() == connNotEstablished }

// anyInChain reports whether f holds for err or any error it wraps.
func anyInChain(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if anyInChain(e, f) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// writeRetryable reports whether a produce that failed with err is known to
// have written nothing and may succeed on retry.
func writeRetryable(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrOverloaded) || notSent(err)
}

// mayHaveApplied reports whether a write attempt that failed with err may
// nonetheless have been applied: the request may have reached the server,
// which then gave no answer that says what it did. That is UNAVAILABLE
// (a node that lost the leader while forwarding, a quorum lost after
// proposing), a timeout or cancellation, a lost connection, or a status
// that only says something went wrong (unknown, internal, aborted). An
// answer proves the outcome otherwise: not leader, overloaded and a
// request that never completely reached the server (notSent) wrote
// nothing, a producer's batch out of sequence or of a fenced epoch was
// not written (a call of several partitions may have written the others,
// which the same call sent again answers as duplicates), the server's refusals
// (bad input, unknown topic, conflict, stale token, storage,
// unauthenticated, permission denied, a TLS handshake failed, ...) come
// before anything is proposed, a call whose token source failed was never
// sent, and per-item results (a *TokenError) say what happened to each
// item.
func mayHaveApplied(err error) bool {
	switch {
	case err == nil, writeRetryable(err), errors.Is(err, ErrStorage), errors.Is(err, ErrTokenSource),
		errors.Is(err, ErrOutOfOrderSequence), errors.Is(err, ErrInvalidProducerEpoch),
		errors.Is(err, ErrUnauthenticated), errors.Is(err, ErrPermissionDenied), tlsFailed(err):
		return false
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), connLost(err):
		return true
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeCanceled,
			connect.CodeUnknown, connect.CodeInternal, connect.CodeAborted, connect.CodeDataLoss:
			return true
		}
	}
	return false
}

func asOverloaded(err error) (*OverloadedError, bool) {
	var oe *OverloadedError
	ok := errors.As(err, &oe)
	return oe, ok
}
