package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// step is one scripted answer of a scriptNode to a call.
type step struct {
	// drop reads the request, then closes the connection without a reply:
	// the node may have acted, the client cannot tell.
	drop bool
	// notLeader answers NOT_LEADER naming the node's leader, which is
	// down: nothing was written.
	notLeader bool
	// err, if set, is the node's error answer.
	err error
}

// scriptNode is a node whose answers to each procedure follow a script;
// once a procedure's script is used up it answers normally (Status with
// its id, Produce with offset 7, marked duplicate when dup is set). Every
// answer lists the members, as logd's do.
type scriptNode struct {
	logdv1connect.UnimplementedLogServiceHandler
	id      string
	members *[]string
	leader  string // named by notLeader answers
	dup     bool

	mu     sync.Mutex
	script map[string][]step // by procedure name; guarded by mu
	calls  map[string]int    // guarded by mu
}

func (n *scriptNode) Status(context.Context, *connect.Request[logdv1.StatusRequest]) (*connect.Response[logdv1.StatusResponse], error) {
	return connect.NewResponse(&logdv1.StatusResponse{NodeId: n.id}), nil
}

func (n *scriptNode) Produce(_ context.Context, req *connect.Request[logdv1.ProduceRequest]) (*connect.Response[logdv1.ProduceResponse], error) {
	out := &logdv1.ProduceResponse{}
	for range req.Msg.GetRecords() {
		out.Results = append(out.Results, &logdv1.RecordResult{Offset: 7, Duplicate: n.dup})
	}
	return connect.NewResponse(out), nil
}

// next counts a call of procedure and pops its next scripted step.
func (n *scriptNode) next(procedure string) (step, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls[procedure]++
	s := n.script[procedure]
	if len(s) == 0 {
		return step{}, false
	}
	n.script[procedure] = s[1:]
	return s[0], true
}

func (n *scriptNode) Calls(procedure string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[procedure]
}

// startScript serves n on 127.0.0.1 and returns its host:port.
func startScript(t *testing.T, n *scriptNode) string {
	t.Helper()
	n.calls = map[string]int{}
	path, h := logdv1connect.NewLogServiceHandler(n)
	errw := connect.NewErrorWriter()
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Logd-Members", strings.Join(*n.members, ","))
		s, ok := n.next(r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
		switch {
		case !ok:
			h.ServeHTTP(w, r)
		case s.notLeader:
			errw.Write(w, r, notLeaderAt(n.leader))
		case s.drop:
			io.Copy(io.Discard, r.Body)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
		default:
			errw.Write(w, r, s.err)
		}
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// closedAddr returns a 127.0.0.1 address nothing listens on: a node that
// is down (connection refused).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// notLeaderAt is the answer of a follower whose leader is down: nothing
// was written.
func notLeaderAt(addr string) error {
	return logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER, LeaderAddress: addr},
		"not the leader, and the leader at %s is unreachable", addr)
}

// forwardFailed is the answer of a follower whose forwarded write lost
// its connection to the leader: the write may have been applied.
func forwardFailed() error {
	return logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAVAILABLE},
		"forwarding to the leader failed; outcome unknown: unexpected EOF")
}

// TestOutcomeUnknownSurvivesRetries replays what a client sees while the
// leader is killed: a node that drops the call, a node that is down, a
// node that answers NOT_LEADER. The later attempts wrote nothing, but the
// first may have, so the call's error must say the outcome is unknown
// (while still naming the last attempt's failure), unless a later attempt
// succeeded.
func TestOutcomeUnknownSurvivesRetries(t *testing.T) {
	keyed := []client.Record{{Value: []byte("pay 5"), IdempotencyKey: "payment-1"}}
	plain := []client.Record{{Value: []byte("pay 5")}}
	tests := []struct {
		name    string
		records []client.Record
		// a is the seed; the client then moves to a node that is down,
		// then to c.
		a, c     []step
		cDup     bool
		attempts int // MaxAttempts

		wantUnknown bool
		wantErr     error // also matched (the last attempt's cause); nil: success
		wantMsg     string
		wantCalls   [2]int // Produce calls on a and c
		wantDup     bool
	}{
		{
			name:    "keyed: dropped, refused, not leader",
			records: keyed, attempts: 3,
			a: []step{{drop: true}}, c: []step{{notLeader: true}},
			wantUnknown: true, wantErr: client.ErrNotLeader, wantMsg: "not the leader", wantCalls: [2]int{1, 1},
		},
		{
			name:    "keyed: forward failed, refused, not leader",
			records: keyed, attempts: 3,
			a: []step{{err: forwardFailed()}}, c: []step{{notLeader: true}},
			wantUnknown: true, wantErr: client.ErrNotLeader, wantMsg: "not the leader", wantCalls: [2]int{1, 1},
		},
		{
			name:    "keyed: dropped, refused, then a definite refusal",
			records: keyed, attempts: 3,
			a: []step{{drop: true}}, c: []step{{err: unknownTopic()}},
			wantUnknown: true, wantErr: client.ErrUnknownTopic, wantCalls: [2]int{1, 1},
		},
		{
			name:    "keyed: dropped, refused, then the original offset",
			records: keyed, attempts: 3,
			a: []step{{drop: true}}, cDup: true,
			wantCalls: [2]int{1, 1}, wantDup: true,
		},
		{
			name:    "keyed: forward failed, refused, then written",
			records: keyed, attempts: 3,
			a:         []step{{err: forwardFailed()}},
			wantCalls: [2]int{1, 1},
		},
		{
			name:    "plain: dropped, not retried",
			records: plain, attempts: 3,
			a:           []step{{drop: true}},
			wantUnknown: true, wantCalls: [2]int{1, 0},
		},
		{
			name:    "plain: forward failed, not retried",
			records: plain, attempts: 3,
			a:           []step{{err: forwardFailed()}},
			wantUnknown: true, wantErr: client.ErrUnavailable, wantMsg: "outcome unknown: unexpected EOF", wantCalls: [2]int{1, 0},
		},
		{
			name:    "plain: not leader, refused, then dropped",
			records: plain, attempts: 4,
			a: []step{{notLeader: true}}, c: []step{{drop: true}},
			wantUnknown: true, wantCalls: [2]int{1, 1},
		},
		{
			name:    "plain: not leader, refused, not leader: nothing written",
			records: plain, attempts: 3,
			a: []step{{notLeader: true}}, c: []step{{notLeader: true}},
			wantErr: client.ErrNotLeader, wantCalls: [2]int{1, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var members []string
			down := closedAddr(t)
			a := &scriptNode{id: "a", members: &members, leader: down, script: map[string][]step{"Produce": tt.a}}
			c := &scriptNode{id: "c", members: &members, leader: down, dup: tt.cDup, script: map[string][]step{"Produce": tt.c}}
			addrA, addrC := startScript(t, a), startScript(t, c)
			members = []string{addrA, down, addrC}

			retry := fastRetry
			retry.MaxAttempts = tt.attempts
			cl, err := client.New(addrA, client.Options{Retry: retry})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx := testContext(t)
			if _, err := cl.Status(ctx); err != nil { // learns the members
				t.Fatal(err)
			}
			res, err := cl.Produce(ctx, "t", tt.records)
			if got := errors.Is(err, client.ErrOutcomeUnknown); got != tt.wantUnknown {
				t.Errorf("Produce error = %v: outcome unknown %v, want %v", err, got, tt.wantUnknown)
			}
			switch {
			case !tt.wantUnknown && tt.wantErr == nil:
				if err != nil {
					t.Fatalf("Produce = %v, want success", err)
				}
				if res[0].Offset != 7 || res[0].Duplicate != tt.wantDup {
					t.Errorf("result = %+v, want offset 7, duplicate %v", res[0], tt.wantDup)
				}
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("Produce error = %v, want it to wrap %v", err, tt.wantErr)
			}
			if tt.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Errorf("Produce error = %v, want it to name %q", err, tt.wantMsg)
			}
			if got := [2]int{a.Calls("Produce"), c.Calls("Produce")}; got != tt.wantCalls {
				t.Errorf("Produce calls on a, c = %v, want %v", got, tt.wantCalls)
			}
		})
	}
}

// TestOutcomeUnknownNotForReads: a read whose reply was lost changed
// nothing, so its error is never outcome unknown.
func TestOutcomeUnknownNotForReads(t *testing.T) {
	var members []string
	a := &scriptNode{id: "a", members: &members, script: map[string][]step{"Status": {{drop: true}, {err: unavailable()}}}}
	members = []string{startScript(t, a)}
	retry := fastRetry
	retry.MaxAttempts = 2
	cl, err := client.New(members[0], client.Options{Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.Status(testContext(t))
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("Status error = %v, want unavailable and not outcome unknown", err)
	}
}
