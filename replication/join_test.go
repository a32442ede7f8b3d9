package replication

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/fsm"
)

// TestJoinLoop: the loop retries failed attempts after the pause, gives each
// attempt its own deadline, stops at the first success with the leader's
// id, and ends with ctx's error when ctx ends during an attempt or a pause.
func TestJoinLoop(t *testing.T) {
	req := JoinRequest{ID: "n2", RaftAddress: "127.0.0.1:7081", APIAddress: "127.0.0.1:7080"}
	errDown := errors.New("connection refused")
	for _, tc := range []struct {
		name string
		// answer gives attempt n's outcome; block waits for the attempt's
		// context to end.
		answer       func(n int) (leader string, err error, block bool)
		cancelAfter  int  // cancel ctx during this attempt (0: never) ...
		inPause      bool // ... or just after it, in the pause that follows
		wantLeader   string
		wantErr      error
		wantAttempts int
		wantWarnings int
	}{
		{name: "first attempt", answer: func(int) (string, error, bool) { return "n1", nil, false },
			wantLeader: "n1", wantAttempts: 1},
		{name: "retries until it succeeds", answer: func(n int) (string, error, bool) {
			if n < 3 {
				return "", errDown, false
			}
			return "n3", nil, false
		}, wantLeader: "n3", wantAttempts: 3, wantWarnings: 2},
		{name: "an attempt past its deadline is retried", answer: func(n int) (string, error, bool) {
			if n == 1 {
				return "", nil, true
			}
			return "n1", nil, false
		}, wantLeader: "n1", wantAttempts: 2, wantWarnings: 1},
		{name: "ends during a pause", answer: func(int) (string, error, bool) { return "", errDown, false },
			cancelAfter: 1, inPause: true, wantErr: context.Canceled, wantAttempts: 1, wantWarnings: 1},
		{name: "ends during an attempt", answer: func(n int) (string, error, bool) { return "", nil, true },
			cancelAfter: 1, wantErr: context.Canceled, wantAttempts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			var mu sync.Mutex
			attempts := 0
			ask := func(actx context.Context, member string, got JoinRequest) (string, error) {
				mu.Lock()
				attempts++
				n := attempts
				mu.Unlock()
				if member != "127.0.0.1:7070" || got != req {
					t.Errorf("attempt %d asked %s for %+v", n, member, got)
				}
				if dl, ok := actx.Deadline(); !ok || time.Until(dl) > 50*time.Millisecond {
					t.Errorf("attempt %d: deadline %v, %v; want one within the attempt timeout", n, dl, ok)
				}
				switch {
				case n == tc.cancelAfter && tc.inPause:
					time.AfterFunc(20*time.Millisecond, cancel)
				case n == tc.cancelAfter:
					cancel()
				}
				leader, err, block := tc.answer(n)
				if block {
					<-actx.Done()
					return "", actx.Err()
				}
				return leader, err
			}
			done := make(chan struct{})
			var leader string
			var err error
			pause := time.Millisecond
			if tc.inPause {
				pause = time.Hour
			}
			go func() {
				defer close(done)
				leader, err = joinLoop(ctx, logger, "127.0.0.1:7070", req, ask, 50*time.Millisecond, pause)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("joinLoop did not return")
			}
			if leader != tc.wantLeader || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("joinLoop = %q, %v; want %q, %v", leader, err, tc.wantLeader, tc.wantErr)
			}
			if attempts != tc.wantAttempts {
				t.Errorf("%d attempts, want %d", attempts, tc.wantAttempts)
			}
			if n := strings.Count(logs.String(), "join failed; retrying"); n != tc.wantWarnings {
				t.Errorf("%d retry warnings, want %d:\n%s", n, tc.wantWarnings, logs.String())
			}
			if joined := strings.Contains(logs.String(), "joined the cluster"); joined != (tc.wantErr == nil) {
				t.Errorf("joined logged %v:\n%s", joined, logs.String())
			}
		})
	}
	if _, err := joinLoop(context.Background(), slog.Default(), "", req, func(context.Context, string, JoinRequest) (string, error) { return "", nil }, time.Second, time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("no member: %v, want ErrInvalidArgument", err)
	}
	if _, err := joinLoop(context.Background(), slog.Default(), "127.0.0.1:7070", req, nil, time.Second, time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("no way to ask: %v, want ErrInvalidArgument", err)
	}
}

// TestJoinClusterSendsFeatureLevel: a joining node tells the leader the
// feature level of its build, so the cluster's level can rise once every
// member runs a build that understands a new command.
func TestJoinClusterSendsFeatureLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), APIAdvertise: "127.0.0.1:7070"})
	defer n.Close()
	var got JoinRequest
	leader, err := n.JoinCluster(ctx, "127.0.0.1:7080", func(_ context.Context, _ string, req JoinRequest) (string, error) {
		got = req
		return "n0", nil
	})
	if err != nil || leader != "n0" {
		t.Fatalf("JoinCluster: %q, %v", leader, err)
	}
	if got.ID != "n1" || got.APIAddress != "127.0.0.1:7070" || got.FeatureLevel != fsm.Level {
		t.Fatalf("join request %+v; want n1 at 127.0.0.1:7070 with feature level %d", got, fsm.Level)
	}
}
