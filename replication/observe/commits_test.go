package observe

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// forwarding connects in-memory transport a to b, wraps b and runs the
// wrapper's Forward until stop is closed (done is closed after it).
func forwarding(t *testing.T) (a *raft.InmemTransport, wrapped *Transport, stop, done chan struct{}) {
	t.Helper()
	_, a = raft.NewInmemTransport("a")
	_, b := raft.NewInmemTransport("b")
	t.Cleanup(func() { a.Close(); b.Close() })
	a.Connect("b", b)
	stop, done = make(chan struct{}), make(chan struct{})
	_, wrapped = WrapTransport(b, NewMetrics(), new(LeaderCommits), stop)
	go func() { defer close(done); wrapped.Forward(stop) }()
	return a, wrapped, stop, done
}

// TestForwardStopAnswersTyped: a request the transport wrapper holds when
// Raft shuts down is answered ErrRaftShutdown with a response of the
// sender's type. hashicorp/raft's in-memory pipeline copies the response
// before it reads the error, so a nil one panicked its goroutine (and the
// test binary of in-memory clusters).
func TestForwardStopAnswersTyped(t *testing.T) {
	a, wrapped, stop, done := forwarding(t)

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
		if idx, ok := wrapped.commits.In(3); ok && idx == 7 {
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

// TestLeaderCommitsNote: the first commit index of the newest term is
// kept; a heartbeat's zero, a later one of the same term and one of an
// older term change nothing.
func TestLeaderCommitsNote(t *testing.T) {
	var c LeaderCommits
	for _, step := range []struct {
		term, index uint64
		want        map[uint64]uint64 // term -> index noted; absent: none
	}{
		{term: 2, index: 0, want: map[uint64]uint64{}},
		{term: 2, index: 10, want: map[uint64]uint64{2: 10}},
		{term: 2, index: 20, want: map[uint64]uint64{2: 10}},
		{term: 1, index: 30, want: map[uint64]uint64{2: 10}},
		{term: 3, index: 5, want: map[uint64]uint64{3: 5}},
	} {
		c.note(step.term, step.index)
		for term := uint64(1); term <= 3; term++ {
			got, ok := c.In(term)
			if want, wantOK := step.want[term]; got != want || ok != wantOK {
				t.Fatalf("after note(%d, %d): in(%d) = %d, %v; want %d, %v", step.term, step.index, term, got, ok, want, wantOK)
			}
		}
	}
}

// TestForwardCutsCommitToTheRequest: an AppendEntries reaches Raft with
// the leader's commit index cut to the request's last entry (its previous
// entry plus its entries), so a follower never commits entries past what
// the leader vouched for in that request; readiness still notes the
// leader's commit index as sent, and the sender's request is not changed.
func TestForwardCutsCommitToTheRequest(t *testing.T) {
	a, wrapped, stop, done := forwarding(t)
	defer func() { close(stop); <-done }()
	for _, c := range []struct {
		prev, entries, commit, want uint64
	}{
		{prev: 10, entries: 0, commit: 20, want: 10}, // nothing sent past 10
		{prev: 10, entries: 3, commit: 20, want: 13},
		{prev: 10, entries: 3, commit: 12, want: 12}, // below the last entry: as sent
		{prev: 30, entries: 0, commit: 30, want: 30}, // a caught-up follower
	} {
		req := &raft.AppendEntriesRequest{Term: 4, PrevLogEntry: c.prev, PrevLogTerm: 4, LeaderCommitIndex: c.commit}
		for i := range c.entries {
			req.Entries = append(req.Entries, &raft.Log{Index: c.prev + 1 + i, Term: 4})
		}
		errc := make(chan error, 1)
		go func() { errc <- a.AppendEntries("b", "b", req, new(raft.AppendEntriesResponse)) }()
		select {
		case rpc := <-wrapped.Consumer():
			got := rpc.Command.(*raft.AppendEntriesRequest).LeaderCommitIndex
			rpc.Respond(&raft.AppendEntriesResponse{Term: 4, Success: true}, nil)
			if got != c.want {
				t.Errorf("prev %d, %d entries, commit %d: Raft got commit %d, want %d", c.prev, c.entries, c.commit, got, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the request never reached Raft")
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if req.LeaderCommitIndex != c.commit {
			t.Errorf("the sender's request was changed: commit %d, sent %d", req.LeaderCommitIndex, c.commit)
		}
	}
	if idx, ok := wrapped.commits.In(4); !ok || idx != 20 {
		t.Errorf("readiness noted commit %d (%v) for term 4, want the leader's 20", idx, ok)
	}
}
