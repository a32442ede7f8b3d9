package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

func unavailable() error {
	return logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAVAILABLE}, "no quorum")
}

func notLeader() error {
	return logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER}, "no leader")
}

func overloaded(after time.Duration) error {
	return logdtest.Error(connect.CodeResourceExhausted, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OVERLOADED, RetryAfterMs: after.Milliseconds()}, "overloaded")
}

func unknownTopic() error {
	return logdtest.Error(connect.CodeNotFound, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNKNOWN_TOPIC}, "no such topic")
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		failures  []error
		wantCalls int
		wantErr   error // nil: the call succeeds in the end
	}{
		{name: "read retried until success", method: "ListTopics", failures: []error{unavailable(), notLeader()}, wantCalls: 3},
		{name: "read attempts are bounded", method: "Status", failures: []error{unavailable(), unavailable(), unavailable(), unavailable(), unavailable()}, wantCalls: 4, wantErr: client.ErrUnavailable},
		{name: "read not retried on a final error", method: "DescribeTopic", failures: []error{unknownTopic()}, wantCalls: 1, wantErr: client.ErrUnknownTopic},
		{name: "produce retried after not leader", method: "Produce", failures: []error{notLeader()}, wantCalls: 2},
		{name: "produce retried after overloaded", method: "Produce", failures: []error{overloaded(time.Millisecond), overloaded(0)}, wantCalls: 3},
		{name: "produce not retried after unavailable", method: "Produce", failures: []error{unavailable()}, wantCalls: 1, wantErr: client.ErrUnavailable},
		{name: "produce attempts are bounded", method: "Produce", failures: []error{notLeader(), notLeader(), notLeader(), notLeader()}, wantCalls: 4, wantErr: client.ErrNotLeader},
		{name: "create topic not retried after unavailable", method: "CreateTopic", failures: []error{unavailable()}, wantCalls: 1, wantErr: client.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []client.RetryEvent
			retry := fastRetry
			retry.OnRetry = func(e client.RetryEvent) { events = append(events, e) }
			c, srv := newTestClient(t, client.Options{Retry: retry})
			ctx := testContext(t)
			mustCreate(t, c, "t", 1)
			srv.FailNext(tt.method, tt.failures...)

			var err error
			switch tt.method {
			case "ListTopics":
				_, err = c.ListTopics(ctx)
			case "Status":
				_, err = c.Status(ctx)
			case "DescribeTopic":
				_, err = c.DescribeTopic(ctx, "t")
			case "Produce":
				_, err = c.Produce(ctx, "t", []client.Record{{Value: []byte("v")}})
			case "CreateTopic":
				_, err = c.CreateTopic(ctx, "u", 1, nil)
			}
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("%s error = %v, want %v", tt.method, err, tt.wantErr)
			}
			calls := srv.Calls(tt.method)
			if tt.method == "CreateTopic" {
				calls-- // mustCreate
			}
			if calls != tt.wantCalls {
				t.Fatalf("%s calls = %d, want %d", tt.method, calls, tt.wantCalls)
			}
			if len(events) != tt.wantCalls-1 {
				t.Fatalf("retry events = %d, want %d", len(events), tt.wantCalls-1)
			}
			for i, e := range events {
				if e.Method != tt.method || e.Attempt != i+1 || e.Err == nil {
					t.Fatalf("retry event %d = %+v", i, e)
				}
			}
		})
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	var delays []time.Duration
	retry := fastRetry
	retry.OnRetry = func(e client.RetryEvent) { delays = append(delays, e.Delay) }
	c, srv := newTestClient(t, client.Options{Retry: retry})
	mustCreate(t, c, "t", 1)
	srv.FailNext("Produce", overloaded(30*time.Millisecond))
	if _, err := c.Produce(testContext(t), "t", []client.Record{{Value: []byte("v")}}); err != nil {
		t.Fatalf("Produce: %v", err)
	}
	if len(delays) != 1 || delays[0] < 30*time.Millisecond {
		t.Fatalf("delays = %v, want one of at least 30ms", delays)
	}
}

func TestRetryStopsWhenWaitOutlivesContext(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	srv.FailNext("Produce", overloaded(time.Hour))
	ctx, cancel := context.WithTimeout(testContext(t), 5*time.Second)
	defer cancel()
	_, err := c.Produce(ctx, "t", []client.Record{{Value: []byte("v")}})
	if !errors.Is(err, client.ErrOverloaded) || srv.Calls("Produce") != 1 {
		t.Fatalf("Produce error = %v after %d calls, want ErrOverloaded after 1", err, srv.Calls("Produce"))
	}
}

func TestPerAttemptTimeoutIsRetriedForReads(t *testing.T) {
	c, srv := newTestClient(t, client.Options{Timeout: 50 * time.Millisecond})
	hang := func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	srv.Intercept("ListTopics", hang)
	if _, err := c.ListTopics(testContext(t)); err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if got := srv.Calls("ListTopics"); got != 2 {
		t.Fatalf("ListTopics calls = %d, want 2", got)
	}
}
