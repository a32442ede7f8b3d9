package replication

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestForwardStopAnswersTyped: a request the transport wrapper holds when
// Raft shuts down is answered ErrRaftShutdown with a response of the
// sender's type. hashicorp/raft's in-memory pipeline copies the response
// before it reads the error, so a nil one panicked its goroutine (and the
// test binary of in-memory clusters).
func TestForwardStopAnswersTyped(t *testing.T) {
	_, a := raft.NewInmemTransport("a")
	_, b := raft.NewInmemTransport("b")
	defer a.Close()
	defer b.Close()
	a.Connect("b", b)
	_, wrapped := observeTransport(b, newRaftObserver(), new(leaderCommits))
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); wrapped.forward(stop) }()

	p, err := a.AppendEntriesPipeline("b", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Nobody reads the wrapper's Consumer: forward holds the request
	// until stop.
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 3, LeaderCommitIndex: 7}, new(raft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		if idx, ok := wrapped.commits.in(3); ok && idx == 7 {
			break
		}
		select {
		case <-deadline:
			t.Fatal("forward never took the request")
		case <-time.After(time.Millisecond):
		}
	}
	close(stop)
	<-done
	select {
	case f := <-p.Consumer():
		if err := f.Error(); !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatalf("the held request was answered %v, want ErrRaftShutdown", err)
		}
	case <-deadline:
		t.Fatal("the held request was never answered")
	}
}
