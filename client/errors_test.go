package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name      string
		serverErr error
		want      error
		retryable bool
		check     func(t *testing.T, err error)
	}{
		{
			name:      "unknown topic",
			serverErr: logdtest.Error(connect.CodeNotFound, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNKNOWN_TOPIC}, "topic %q does not exist", "x"),
			want:      client.ErrUnknownTopic,
		},
		{
			name:      "unknown partition",
			serverErr: logdtest.Error(connect.CodeNotFound, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNKNOWN_PARTITION}, "no partition 9"),
			want:      client.ErrUnknownPartition,
		},
		{
			name:      "record too large shares its code with invalid argument",
			serverErr: logdtest.Error(connect.CodeInvalidArgument, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_RECORD_TOO_LARGE}, "too big"),
			want:      client.ErrRecordTooLarge,
		},
		{
			name:      "invalid argument",
			serverErr: logdtest.Error(connect.CodeInvalidArgument, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_INVALID_ARGUMENT}, "bad"),
			want:      client.ErrInvalidArgument,
		},
		{
			name:      "stale token",
			serverErr: logdtest.Error(connect.CodeFailedPrecondition, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_STALE_TOKEN}, "stale"),
			want:      client.ErrStaleToken,
		},
		{
			name:      "idempotency conflict",
			serverErr: logdtest.Error(connect.CodeAlreadyExists, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_IDEMPOTENCY_CONFLICT}, "conflict"),
			want:      client.ErrIdempotencyConflict,
		},
		{
			name:      "out of order sequence",
			serverErr: logdtest.Error(connect.CodeAborted, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OUT_OF_ORDER_SEQUENCE}, "gap"),
			want:      client.ErrOutOfOrderSequence,
		},
		{
			name:      "invalid producer epoch",
			serverErr: logdtest.Error(connect.CodeFailedPrecondition, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_INVALID_PRODUCER_EPOCH}, "fenced"),
			want:      client.ErrInvalidProducerEpoch,
		},
		{
			name:      "storage",
			serverErr: logdtest.Error(connect.CodeInternal, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_STORAGE}, "disk on fire"),
			want:      client.ErrStorage,
		},
		{
			name:      "unavailable",
			serverErr: logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAVAILABLE}, "no quorum"),
			want:      client.ErrUnavailable,
			retryable: true,
		},
		{
			name:      "unavailable without detail",
			serverErr: connect.NewError(connect.CodeUnavailable, errors.New("proxy says no")),
			want:      client.ErrUnavailable,
			retryable: true,
		},
		{
			name:      "not leader",
			serverErr: logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER, LeaderAddress: "10.0.0.2:7070"}, "not the leader"),
			want:      client.ErrNotLeader,
			retryable: true,
			check: func(t *testing.T, err error) {
				var nl *client.NotLeaderError
				if !errors.As(err, &nl) || nl.LeaderAddress != "10.0.0.2:7070" {
					t.Errorf("NotLeaderError = %+v", nl)
				}
			},
		},
		{
			name:      "overloaded",
			serverErr: logdtest.Error(connect.CodeResourceExhausted, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OVERLOADED, RetryAfterMs: 250}, "queue full"),
			want:      client.ErrOverloaded,
			retryable: true,
			check: func(t *testing.T, err error) {
				var oe *client.OverloadedError
				if !errors.As(err, &oe) || oe.RetryAfter != 250*time.Millisecond {
					t.Errorf("OverloadedError = %+v", oe)
				}
			},
		},
		{
			name:      "out of range",
			serverErr: logdtest.Error(connect.CodeOutOfRange, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE, LogStartOffset: 10, EndOffset: 20}, "offset 3 out of range"),
			want:      client.ErrOffsetOutOfRange,
			check: func(t *testing.T, err error) {
				var oor *client.OutOfRangeError
				if !errors.As(err, &oor) || oor.LogStart != 10 || oor.End != 20 || oor.Offset != 3 {
					t.Errorf("OutOfRangeError = %+v", oor)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, srv := newTestClient(t, client.Options{Retry: client.RetryPolicy{MaxAttempts: 1}})
			srv.FailNext("Fetch", tt.serverErr)
			_, err := c.Fetch(testContext(t), client.FetchRequest{Topic: "t", Offset: 3})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Fetch error = %v, want %v", err, tt.want)
			}
			var ce *connect.Error
			errors.As(tt.serverErr, &ce)
			if !strings.Contains(err.Error(), ce.Message()) {
				t.Errorf("error %q lost the server's message %q", err, ce.Message())
			}
			if connect.CodeOf(err) != ce.Code() {
				t.Errorf("CodeOf = %v, want %v", connect.CodeOf(err), ce.Code())
			}
			if got := client.IsRetryable(err); got != tt.retryable {
				t.Errorf("IsRetryable = %v, want %v", got, tt.retryable)
			}
			if tt.check != nil {
				tt.check(t, err)
			}
		})
	}
}

func TestIsRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil},
		{name: "plain", err: errors.New("x")},
		{name: "canceled", err: context.Canceled},
		{name: "deadline", err: fmt.Errorf("call: %w", context.DeadlineExceeded), want: true},
		{name: "wrapped sentinel", err: fmt.Errorf("produce: %w", client.ErrNotLeader), want: true},
		{name: "unknown topic", err: client.ErrUnknownTopic},
		{name: "connect unavailable", err: connect.NewError(connect.CodeUnavailable, errors.New("dial")), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := client.IsRetryable(tt.err); got != tt.want {
				t.Fatalf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestConnectionRefusedIsUnavailable(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	addr := srv.Addr()
	srv.Close() // nothing listens on addr any more
	var retries int
	c, err := client.New(addr, client.Options{Retry: client.RetryPolicy{
		MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		OnRetry: func(client.RetryEvent) { retries++ },
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Produce(testContext(t), "t", []client.Record{{Value: []byte("v")}})
	if !errors.Is(err, client.ErrUnavailable) || !client.IsRetryable(err) {
		t.Fatalf("Produce error = %v, want ErrUnavailable", err)
	}
	// A refused connection proves nothing was sent, so even Produce retries.
	if retries != 2 {
		t.Fatalf("retries = %d, want 2", retries)
	}
}

// TestReasonOf: an error from a server names its reason without the
// REASON_ prefix, through any wrapping; a client-side error names none.
func TestReasonOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("produce: %w", &client.OverloadedError{RetryAfter: time.Second}), "OVERLOADED"},
		{fmt.Errorf("describe: %w", client.ErrUnknownTopic), "UNKNOWN_TOPIC"},
		{client.ErrStaleToken, "STALE_TOKEN"},
		{errors.New("boom"), ""},
		{nil, ""},
	} {
		if got := client.ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
