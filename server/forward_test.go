package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/server"
)

// failoverBackend is a node during a failover, as far as forwarding and
// readiness see it: whom it takes for the leader, whether it leads and
// whether it is ready. Calls outside those paths are not implemented (the
// embedded nil Backend panics), except Produce, which a node that leads
// answers with produced.
type failoverBackend struct {
	backend.API

	mu         sync.Mutex
	leaderAddr string
	leads      bool
	ready      bool
	produced   int
}

func (b *failoverBackend) set(f func(*failoverBackend)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

func (b *failoverBackend) NodeID() string               { return "f" }
func (b *failoverBackend) APIAddress() string           { return "self:1" }
func (b *failoverBackend) Failed() error                { return nil }
func (b *failoverBackend) MemberAPIAddresses() []string { return nil }

func (b *failoverBackend) Ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready
}

func (b *failoverBackend) IsLeader() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leads
}

func (b *failoverBackend) LeaderAPIAddress() (string, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.leaderAddr == "" {
		return "", ""
	}
	return b.leaderAddr, "l"
}

// LeaderCallAddress: the stand-in leader registered no peer address.
func (b *failoverBackend) LeaderCallAddress() (string, string) { return b.LeaderAPIAddress() }

func (b *failoverBackend) Produce(context.Context, backend.ProduceRequest) (backend.ProduceResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.leads {
		return backend.ProduceResult{}, backend.ErrNotLeader
	}
	b.produced++
	return backend.ProduceResult{}, nil
}

// standInLeader is a leader's API that acknowledges every Produce and
// counts them.
func standInLeader(t *testing.T) (addr string, produced *atomic.Int32) {
	t.Helper()
	produced = new(atomic.Int32)
	path, h := logdv1connect.NewLogServiceHandler(&producer{n: produced})
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), produced
}

type producer struct {
	logdv1connect.UnimplementedLogServiceHandler
	n *atomic.Int32
}

func (p *producer) Produce(ctx context.Context, _ *connect.Request[logdv1.ProduceRequest]) (*connect.Response[logdv1.ProduceResponse], error) {
	// The caller allowed 5s (TestWriteWaitsOutFailover); the time this
	// node's wait took must be off what the leader is given.
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > 4900*time.Millisecond {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("deadline %v away: the wait was not taken off", time.Until(d)))
	}
	p.n.Add(1)
	return connect.NewResponse(&logdv1.ProduceResponse{}), nil
}

// closedAddr is an address that refuses connections: a dead leader.
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

// TestWriteWaitsOutFailover: a write that reaches a node in the middle of
// a failover is held until a leader can take it, and then acknowledged in
// the same call, instead of being refused at once.
func TestWriteWaitsOutFailover(t *testing.T) {
	const change = 150 * time.Millisecond
	tests := []struct {
		name string
		// before is the node's view when the write arrives; after, its view
		// change later.
		before, after func(b *failoverBackend, leader string)
		// onLeader and here are the writes the stand-in leader and this
		// node acknowledge.
		onLeader, here int32
	}{
		{
			name:     "no leader known yet",
			before:   func(b *failoverBackend, _ string) { b.ready = true },
			after:    func(b *failoverBackend, leader string) { b.leaderAddr = leader },
			onLeader: 1,
		},
		{
			name:     "the known leader is dead",
			before:   func(b *failoverBackend, _ string) { b.ready, b.leaderAddr = true, "dead" },
			after:    func(b *failoverBackend, leader string) { b.leaderAddr = leader },
			onLeader: 1,
		},
		{
			name:   "this node wins the election",
			before: func(b *failoverBackend, _ string) { b.ready, b.leaderAddr = true, "dead" },
			after:  func(b *failoverBackend, _ string) { b.leaderAddr, b.leads = "self:1", true },
			here:   1,
		},
		{
			name:   "this node leads before its barrier",
			before: func(b *failoverBackend, _ string) { b.leaderAddr, b.leads = "self:1", true },
			after:  func(b *failoverBackend, _ string) { b.ready = true },
			here:   1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leader, produced := standInLeader(t)
			dead := closedAddr(t)
			b := &failoverBackend{}
			b.set(func(b *failoverBackend) {
				tc.before(b, leader)
				if b.leaderAddr == "dead" {
					b.leaderAddr = dead
				}
			})
			srv := httptest.NewServer(server.New(server.Options{Backend: b}).Handler())
			defer srv.Close()
			rpc := logdv1connect.NewLogServiceClient(srv.Client(), srv.URL)
			timer := time.AfterFunc(change, func() { b.set(func(b *failoverBackend) { tc.after(b, leader) }) })
			defer timer.Stop()

			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err := rpc.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{{Value: []byte("v")}}}))
			if err != nil {
				t.Fatalf("write refused after %v: %v", time.Since(start), err)
			}
			b.mu.Lock()
			here := b.produced
			b.mu.Unlock()
			if produced.Load() != tc.onLeader || int32(here) != tc.here {
				t.Errorf("acknowledged by the leader %d, here %d; want %d, %d", produced.Load(), here, tc.onLeader, tc.here)
			}
		})
	}
}

// TestWriteWaitIsBounded: with no leader in sight, a write is refused
// (NOT_LEADER, nothing written) after a bounded wait, or as soon as its
// caller gives up.
func TestWriteWaitIsBounded(t *testing.T) {
	b := &failoverBackend{ready: true}
	srv := httptest.NewServer(server.New(server.Options{Backend: b}).Handler())
	defer srv.Close()
	rpc := logdv1connect.NewLogServiceClient(srv.Client(), srv.URL)
	req := connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{{Value: []byte("v")}}})

	start := time.Now()
	_, err := rpc.Produce(t.Context(), req)
	if took := time.Since(start); connect.CodeOf(err) != connect.CodeUnavailable || took > 3*time.Second {
		t.Fatalf("after %v: %v; want UNAVAILABLE (not leader) within the wait", took, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := rpc.Produce(ctx, req); err == nil || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("caller gone after 100ms: answered after %v: %v", time.Since(start), err)
	}
}
