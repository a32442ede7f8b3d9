package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
)

// fakeNode answers Status with its id, and CreateTopic with notLeader's
// address (if set) as a NOT_LEADER error, the first notLeaderTimes times
// if that is set. Every response lists members.
type fakeNode struct {
	logdv1connect.UnimplementedLogServiceHandler
	id             string
	members        *[]string
	notLeader      string
	notLeaderTimes int32
	creates        atomic.Int32
	refusals       atomic.Int32
}

func (f *fakeNode) Status(context.Context, *connect.Request[logdv1.StatusRequest]) (*connect.Response[logdv1.StatusResponse], error) {
	return connect.NewResponse(&logdv1.StatusResponse{NodeId: f.id}), nil
}

func (f *fakeNode) CreateTopic(ctx context.Context, req *connect.Request[logdv1.CreateTopicRequest]) (*connect.Response[logdv1.CreateTopicResponse], error) {
	if f.notLeader != "" && (f.notLeaderTimes == 0 || f.refusals.Add(1) <= f.notLeaderTimes) {
		ce := connect.NewError(connect.CodeUnavailable, errors.New("not leader"))
		d, _ := connect.NewErrorDetail(&logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER, LeaderAddress: f.notLeader})
		ce.AddDetail(d)
		return nil, ce
	}
	f.creates.Add(1)
	return connect.NewResponse(&logdv1.CreateTopicResponse{}), nil
}

func startFake(t *testing.T, f *fakeNode) string {
	t.Helper()
	path, h := logdv1connect.NewLogServiceHandler(f)
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Logd-Members", strings.Join(*f.members, ","))
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestClientFollowsCluster(t *testing.T) {
	ctx := testContext(t)
	var members []string
	a, b := &fakeNode{id: "a", members: &members}, &fakeNode{id: "b", members: &members}
	addrA, addrB := startFake(t, a), startFake(t, b)
	down := closedAddr(t) // a member that is down
	members = []string{addrA, down, addrB}

	c, err := client.New(addrA, client.Options{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, err := c.Status(ctx); err != nil || st.NodeID != "a" {
		t.Fatalf("status: %+v %v", st, err)
	}
	if got := c.Members(); strings.Join(got, ",") != strings.Join(members, ",") {
		t.Fatalf("members %v, want %v", got, members)
	}

	// NOT_LEADER with an address: the retry goes to the leader.
	a.notLeader = addrB
	if _, err := c.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	if b.creates.Load() != 1 || c.Current() != addrB {
		t.Fatalf("creates on b %d, current %s", b.creates.Load(), c.Current())
	}

	// The current node goes away: calls move on through the known members
	// (skipping the one that is down too).
	c2, err := client.New(down, client.Options{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Status(ctx); err == nil {
		t.Fatal("status of a down node with no other member known")
	}
	c3, err := client.New(addrA, client.Options{Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := c3.Status(ctx); err != nil { // learns the members
		t.Fatal(err)
	}
	a.notLeader = down // a says the leader is the node that is down
	if _, err := c3.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatalf("create: %v (current %s)", err, c3.Current())
	}
	if c3.Current() != addrB || b.creates.Load() != 2 {
		t.Fatalf("current %s, creates on b %d", c3.Current(), b.creates.Load())
	}
}

// TestClientStaysOffRefusedLeader: in a failover, followers name the dead
// leader until they give up on it. A client that was just refused by that
// address stays with the follower (which holds the call until a new
// leader serves) instead of going back to the dead node; a client that
// goes back spends an attempt there and runs out of the four it has.
func TestClientStaysOffRefusedLeader(t *testing.T) {
	ctx := testContext(t)
	var members []string
	a, b := &fakeNode{id: "a", members: &members}, &fakeNode{id: "b", members: &members}
	addrA, addrB := startFake(t, a), startFake(t, b)
	dead := closedAddr(t)
	members = []string{addrA, dead, addrB}
	retry := client.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	c, err := client.New(addrA, client.Options{Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(ctx); err != nil { // learns the members
		t.Fatal(err)
	}
	// Attempts: a names the dead leader; the dead node refuses, the client
	// moves on to b; b names the dead leader once more, then serves.
	a.notLeader = dead
	b.notLeader, b.notLeaderTimes = dead, 1
	if _, err := c.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatalf("create: %v (current %s)", err, c.Current())
	}
	if c.Current() != addrB || b.creates.Load() != 1 {
		t.Fatalf("current %s, creates on b %d", c.Current(), b.creates.Load())
	}
}
