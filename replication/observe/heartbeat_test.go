package observe

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestHeartbeatOfNewerTermTakesMainLoop: a heartbeat of the node's term
// takes Raft's fast path; one of a newer term (or any before the wrapper
// knows the term) reaches Consumer instead, so Raft's main loop, not the
// transport's goroutine, raises the term (heartbeat.go). A heartbeat held
// for the main loop at shutdown is answered ErrRaftShutdown.
func TestHeartbeatOfNewerTermTakesMainLoop(t *testing.T) {
	// The in-memory transport has no fast path: TCP on the loopback.
	tcp := func() *raft.NetworkTransport {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 10*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a, b := tcp(), tcp()
	defer b.Close()
	defer a.Close()
	defer a.CloseStreams() // b's connection goroutines end with them
	target := b.LocalAddr()
	stop := make(chan struct{})
	trans, wrapped := WrapTransport(b, NewMetrics(), new(LeaderCommits), stop)
	var fast atomic.Int64
	trans.SetHeartbeatHandler(func(rpc raft.RPC) {
		fast.Add(1)
		rpc.Respond(&raft.AppendEntriesResponse{Term: 5, Success: true}, nil)
	})
	heartbeat := func(term uint64) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- a.AppendEntries("b", target, &raft.AppendEntriesRequest{Term: term, RPCHeader: raft.RPCHeader{Addr: []byte(a.LocalAddr())}}, new(raft.AppendEntriesResponse))
		}()
		return done
	}
	// mainLoop answers the next request that reaches Consumer.
	mainLoop := func(want uint64) {
		t.Helper()
		select {
		case rpc := <-trans.Consumer():
			req, ok := rpc.Command.(*raft.AppendEntriesRequest)
			if !ok || req.Term != want {
				t.Fatalf("main loop got %#v, want a heartbeat of term %d", rpc.Command, want)
			}
			rpc.Respond(&raft.AppendEntriesResponse{Term: want, Success: true}, nil)
		case <-time.After(10 * time.Second):
			t.Fatalf("the heartbeat of term %d never reached the main loop", want)
		}
	}
	answered := func(done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the heartbeat was never answered")
			return nil
		}
	}

	// The term is not known yet: the main loop.
	done := heartbeat(5)
	mainLoop(5)
	if err := answered(done); err != nil {
		t.Fatal(err)
	}
	var term atomic.Uint64
	term.Store(5)
	wrapped.SetTerm(term.Load)
	for _, hb := range []uint64{5, 4} {
		if err := answered(heartbeat(hb)); err != nil {
			t.Fatal(err)
		}
	}
	if n := fast.Load(); n != 2 {
		t.Fatalf("%d heartbeats of the node's term or older took the fast path, want 2", n)
	}
	done = heartbeat(6)
	mainLoop(6)
	if err := answered(done); err != nil {
		t.Fatal(err)
	}
	if n := fast.Load(); n != 2 {
		t.Fatalf("a heartbeat of a newer term took the fast path (%d in all)", n)
	}
	// Held for a main loop that is gone.
	done = heartbeat(7)
	time.Sleep(10 * time.Millisecond)
	close(stop)
	if err := answered(done); !errors.Is(err, raft.ErrRaftShutdown) && (err == nil || err.Error() != raft.ErrRaftShutdown.Error()) {
		t.Fatalf("a heartbeat held at shutdown was answered %v, want ErrRaftShutdown", err)
	}
}

// failingTransport answers every AppendEntries with err.
type failingTransport struct {
	raft.Transport
	err   error
	calls atomic.Int32
}

func (f *failingTransport) AppendEntries(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error {
	f.calls.Add(1)
	return f.err
}

// TestAppendEntriesAwaitsARefusingPeer: an AppendEntries refused because
// the follower's node is down waits (SetAwaitPeer) before it answers the
// failure, and is not sent again by the wrapper; any other failure
// answers at once.
func TestAppendEntriesAwaitsARefusingPeer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		waits bool
	}{
		{"refused", fmt.Errorf("raft session to x: %w", syscall.ECONNREFUSED), true},
		{"other", io.ErrUnexpectedEOF, false},
	} {
		inner := &failingTransport{err: tc.err}
		tr, w := WrapTransport(inner, NewMetrics(), new(LeaderCommits), make(chan struct{}))
		var awaited []raft.ServerAddress
		w.SetAwaitPeer(func(a raft.ServerAddress) bool { awaited = append(awaited, a); return true })
		err := tr.AppendEntries("n2", "peer:1", &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: AppendEntries answered %v, want %v", tc.name, err, tc.err)
		}
		if got := len(awaited) == 1 && awaited[0] == "peer:1"; got != tc.waits {
			t.Errorf("%s: awaited %v, want a wait: %v", tc.name, awaited, tc.waits)
		}
		if n := inner.calls.Load(); n != 1 {
			t.Errorf("%s: the request went %d times, want once", tc.name, n)
		}
	}
}
