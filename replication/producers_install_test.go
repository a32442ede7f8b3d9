package replication

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
	"github.com/logd-dev/logd/replication/internal/recordtest"
)

// TestProducerStateInstalledSnapshot: a follower that installs the
// leader's snapshot (fetching the segments from the leader, as one that
// fell behind does) judges an idempotent producer's next batches as the
// leader would: a retry of a batch before the snapshot is a duplicate
// answered with its original offset, the next in sequence is appended,
// a gap refused, and the producer id allocator goes on where the
// leader's was.
func TestProducerStateInstalledSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := Open(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(),
		RaftLogLevel: "error", Fatal: func(err error) { t.Errorf("fatal: %v", err) },
		CleanerInterval: time.Hour, SnapshotInterval: time.Hour, APIAdvertise: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv := &http.Server{Handler: NewBackend(n).SegmentHandler()}
	go srv.Serve(ln)
	defer srv.Close()
	for {
		if _, ok := n.FSM().NodeAddress("n1"); n.IsLeader() && ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no registered leader")
		case <-time.After(10 * time.Millisecond):
		}
	}
	b := NewBackend(n)
	if _, err := b.createTopic(ctx, fsm.CreateTopic{Name: "p", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	id, _, err := b.InitProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := range int32(3) {
		if _, err := b.appendCommand(ctx, fsm.Append{Topic: "p", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: recordtest.ProducerBatch(t, id, 0, seq, "v")}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	snap := fsmtest.Snapshot(t, n.FSM())
	index := n.FSM().AppliedIndex()

	sc := catchup.NewSegmentClient(peer.HTTP{})
	signPeerCalls(sc, n.stores.port, Config{NodeID: "n2"})
	f, fatals := fsmtest.New(t, t.TempDir(), catchup.NewSegmentFetcher(sc, catchup.FetcherOptions{Timeout: 10 * time.Second, Logger: fsmtest.Logger()}))
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	for _, step := range []struct {
		name string
		seq  int32
		base int64 // -1: refused
	}{
		{"retry of the first batch", 0, 0},
		{"retry of the last batch", 2, 2},
		{"next in sequence", 3, 3},
		{"gap", 5, -1},
	} {
		index++
		res := f.ApplyBatch([]fsm.Entry{{Index: index, Command: true, Data: fsm.EncodeAppend(now, fsm.Append{Topic: "p",
			Batches: []fsm.PartitionBatch{{Partition: 0, Batch: recordtest.ProducerBatch(t, id, 0, step.seq, "v")}}})}})[0]
		r, ok := res.(fsm.AppendResult)
		if !ok || r.BaseOffsets[0] != step.base || (r.Errors != nil) != (step.base < 0) {
			t.Fatalf("%s on the follower: %+v", step.name, res)
		}
	}
	if got := f.NextProducerID(); got != id+1 {
		t.Fatalf("the follower's next producer id %d, want %d", got, id+1)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}
