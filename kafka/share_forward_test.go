package kafka

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// callsLeader is a leader's backend that keeps the handler of the calls
// of other nodes, for callsFollower to call.
type callsLeader struct {
	backend.Kafka
	mu sync.Mutex
	h  func(ctx context.Context, from string, req []byte) ([]byte, error)
}

func (l *callsLeader) HandleLeaderCalls(_ string, h func(ctx context.Context, from string, req []byte) ([]byte, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.h = h
}

func (l *callsLeader) CallLeader(context.Context, string, []byte) ([]byte, error) {
	return nil, backend.ErrNotLeader
}

// callsFollower is node id, a follower of the leader whose backend is l,
// calling it directly.
type callsFollower struct {
	follower
	l  *callsLeader
	id string
}

func (f callsFollower) HandleLeaderCalls(string, func(ctx context.Context, from string, req []byte) ([]byte, error)) {
}

func (f callsFollower) CallLeader(ctx context.Context, _ string, req []byte) ([]byte, error) {
	f.l.mu.Lock()
	h := f.l.h
	f.l.mu.Unlock()
	if h == nil {
		return nil, backend.ErrNotLeader
	}
	return h(ctx, f.id, req)
}

// TestShareForwarded: a node that does not lead serves ShareFetch and
// ShareAcknowledge by handing them to the leader's coordinator. A member
// fetching through the follower and through the leader holds a session
// on each (opening one does not replace the other); its records are
// acknowledged through the node that handed them out; when its
// connection to the follower closes, the leader releases what it held
// there (the lock is an hour), and another member gets it. Without a
// leader to call, the follower answers NOT_LEADER_OR_FOLLOWER.
func TestShareForwarded(t *testing.T) {
	lb := &callsLeader{}
	tn := startNode(t, withShare(time.Minute, time.Hour, 10), func(o *Options) { lb.Kafka = o.Backend; o.Backend = lb })
	ff := startNode(t, withShare(time.Minute, time.Hour, 10), func(o *Options) {
		o.Backend = callsFollower{follower: follower{tn.backend}, l: lb, id: "n2"}
	})
	shareSetup(t, tn, "fw", "g", 5, queue.Config{})
	hb, viaFollower, viaLeader, b := dial(t, tn.addr), dial(t, ff.addr), dial(t, tn.addr), dial(t, tn.addr)
	hb.join("g", "a", "fw")
	b.join("g", "b", "fw")

	r := viaFollower.shareFetch(1, tn, "g", "a", 0, "fw", true, 0)
	got := acquired(r)[0]
	if r.ErrorCode != 0 || len(got) != 5 {
		t.Fatalf("a through the follower: code %d, acquired %v; want all 5", r.ErrorCode, got)
	}
	if r := viaLeader.shareFetch(1, tn, "g", "a", 0, "fw", true, 0); r.ErrorCode != 0 || len(acquired(r)[0]) != 0 {
		t.Fatalf("a's session on the leader: code %d, acquired %v; want none", r.ErrorCode, acquired(r))
	}
	// The follower's session is still a's: its next epoch applies.
	acks := viaFollower.shareAcknowledge(1, tn, "g", "a", 1, "fw", false, shareAck{partition: 0, first: 0, last: 1, types: []int8{ackAccept}})
	if acks.ErrorCode != 0 || ackCodes(acks)[0] != 0 {
		t.Fatalf("a accepts 0-1 through the follower: code %d, %v", acks.ErrorCode, ackCodes(acks))
	}
	viaFollower.conn.Close()
	epoch := int32(0)
	again := map[int64]int16{}
	waitFor(t, 10*time.Second, "b acquires what a held through the follower", func() bool {
		for o, d := range acquired(b.shareFetch(1, tn, "g", "b", epoch, "fw", epoch == 0, 200*time.Millisecond))[0] {
			again[o] = d
		}
		epoch++
		return len(again) == 3
	})
	for o, d := range again {
		if o < 2 || d != 2 {
			t.Errorf("offset %d at delivery %d, want offsets 2-4 at delivery 2", o, d)
		}
	}

	lb.HandleLeaderCalls(shareService, nil)
	if code := dial(t, ff.addr).shareFetch(1, tn, "g", "a", 0, "fw", true, 0).ErrorCode; code != errNotLeaderOrFollower {
		t.Fatalf("a through the follower without a leader to call: code %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
}
