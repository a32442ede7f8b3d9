package replication

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/raftstore"
)

// TestJoinWithinMoveBudget: a node that joins after the leader's Raft log
// was cut behind a snapshot builds its replica by installing the snapshot
// and fetching the segments from the leader's segment endpoint over HTTP,
// within its Config.MoveBytesPerSecond: the join takes at least (bytes -
// burst) / rate, and the node counts the bytes. The leader, which fetched
// nothing, counts none; entries replicated after the install
// (AppendEntries) are not counted against the budget.
func TestJoinWithinMoveBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const rate = 32 << 10 // burst 32 KiB
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := newJoinCluster(t)
	c.configure = func(id string, cfg *Config) {
		cfg.SegmentSource = catchup.NewSegmentClient(peer.HTTP{})
		switch id {
		case "n1":
			// A log cut right behind each snapshot: a node that joins
			// later can only install the snapshot.
			cfg.APIAdvertise, cfg.RaftLogStore, cfg.TrailingLogs = ln.Addr().String(), raftstore.LogStoreBoltDB, 1
		case "n2":
			cfg.MoveBytesPerSecond = rate
		}
	}
	l := c.open(ctx, "n1", true)
	srv := &http.Server{Handler: NewBackend(l).SegmentHandler()}
	go srv.Serve(ln)
	defer srv.Close()

	b := NewBackend(l)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "m", Partitions: 1, Config: map[string]string{"segment.bytes": "32768"}}); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", 1000)
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "m", Records: []backend.ProduceRecord{{Value: fmt.Appendf(nil, "%04d%s", i, value)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	created := l.FSM().AppliedIndex()
	produce(0, 100)
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if first, err := l.stores.logs.FirstIndex(); err != nil || first <= created {
		t.Fatalf("the leader's Raft log starts at %d (%v), with the topic's creation (%d): a join would replay it, so the test proves nothing", first, err, created)
	}
	p, err := l.FSM().Partition("m", 0)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range p.Log().Segments() {
		n += s.Bytes
	}
	minTime := time.Duration(float64(n-rate) / rate * float64(time.Second))
	if minTime < time.Second {
		t.Fatalf("%d bytes take %v at the rate: too little to tell pacing from none", n, minTime)
	}

	n2 := c.open(ctx, "n2", false)
	start := time.Now()
	if err := l.Join(ctx, joinRequest(n2), c.probe); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < minTime {
		t.Errorf("n2 joined with %d bytes to fetch in %v at %d B/s, want at least %v", n, elapsed, rate, minTime)
	}
	st := n2.CatchUpStats()
	if st.Bytes < n || st.BytesPerSecond != rate {
		t.Fatalf("n2's catch-up stats %+v; want at least the %d bytes of the segments, at %d B/s", st, n, rate)
	}
	if lst := l.CatchUpStats(); lst.Bytes != 0 || lst.BytesPerSecond != catchup.DefaultMoveBytesPerSecond {
		t.Errorf("the leader's catch-up stats %+v; want no bytes, the default budget", lst)
	}

	// Appends replicated to n2 from now on go through Raft, not the budget.
	produce(100, 120)
	waitFor(ctx, t, "n2 applies the later appends", func() bool { return n2.FSM().AppliedIndex() >= l.FSM().AppliedIndex() }, func() string {
		return fmt.Sprintf("n2 applied %d, n1 %d", n2.FSM().AppliedIndex(), l.FSM().AppliedIndex())
	})
	if got := n2.CatchUpStats(); got.Bytes != st.Bytes {
		t.Errorf("n2 counted %d bytes after replicating appends, %d before: Raft's entries went through the budget", got.Bytes, st.Bytes)
	}
	q, err := n2.FSM().Partition("m", 0)
	if err != nil || q.Log().EndOffset() != 120 {
		t.Fatalf("n2's partition: %v; want 120 records", err)
	}
}
