package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication/internal/recordtest"
)

// idempotentBatch returns a batch of n records from producer id at
// epoch, its first sequence seq.
func idempotentBatch(t *testing.T, id int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	vals := make([]string, n)
	for i := range vals {
		vals[i] = "v"
	}
	return recordtest.ProducerBatch(t, id, epoch, seq, vals...)
}

// TestProducerState: Kafka's rules, applied through append entries, kept
// across a snapshot and its restore, and expired by command time.
func TestProducerState(t *testing.T) {
	dir := t.TempDir()
	f, fatals := testFSM(t, dir)
	now := int64(1_700_000_000_000_000_000)
	index := uint64(0)
	apply := func(f *FSM, data []byte) any {
		index++
		return f.apply(Entry{Index: index, Command: true, Data: data})
	}
	apply(f, createCmd(t, "p", 2, now))
	init := func(f *FSM) int64 {
		d, err := EncodeProducerInit(now)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := apply(f, d).(ProducerInitResult)
		if !ok || r.Epoch != 0 {
			t.Fatalf("producer init: %v", r)
		}
		return r.ID
	}
	id := init(f)
	if again := init(f); again != id+1 {
		t.Fatalf("second id %d after %d", again, id)
	}
	type step struct {
		name  string
		part  int32
		epoch int16
		seq   int32
		n     int
		base  int64 // -1: refused
		err   error
	}
	run := func(f *FSM, steps []step) {
		t.Helper()
		for _, s := range steps {
			res := apply(f, encodeAppend(now, Append{Topic: "p", Batches: []PartitionBatch{{Partition: s.part, Batch: idempotentBatch(t, id, s.epoch, s.seq, s.n)}}}))
			r, ok := res.(AppendResult)
			if !ok {
				t.Fatalf("%s: %v", s.name, res)
			}
			var err error
			if r.Errors != nil {
				err = r.Errors[0]
			}
			if r.BaseOffsets[0] != s.base || !errors.Is(err, s.err) || (err == nil) != (s.err == nil) {
				t.Fatalf("%s: base %d, err %v; want %d, %v", s.name, r.BaseOffsets[0], err, s.base, s.err)
			}
		}
	}
	run(f, []step{
		{name: "first", seq: 0, n: 2, base: 0},
		{name: "next", seq: 2, n: 1, base: 2},
		{name: "3", seq: 3, n: 1, base: 3},
		{name: "4", seq: 4, n: 1, base: 4},
		{name: "5", seq: 5, n: 1, base: 5},
		{name: "gap", seq: 7, n: 1, base: -1, err: backend.ErrOutOfOrderSequence},
		{name: "6", seq: 6, n: 1, base: 6},
		{name: "duplicate of the oldest kept", seq: 2, n: 1, base: 2},
		{name: "duplicate of the last", seq: 6, n: 1, base: 6},
		{name: "older than five batches", seq: 0, n: 2, base: -1, err: backend.ErrOutOfOrderSequence},
		{name: "other partition, own state", part: 1, seq: 9, n: 1, base: 0},
	})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	snap.Release()
	snapIndex := index
	run(f, []step{{name: "7 after the snapshot", seq: 7, n: 1, base: 7}})
	f.Close()

	// A restart: the snapshot restored, the entry after it replayed (its
	// batch already in the log), which the producer state learns again.
	f2, _ := testFSM(t, dir)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	index = snapIndex
	run(f2, []step{
		{name: "7 replayed", seq: 7, n: 1, base: 7},
		{name: "duplicate kept by the snapshot", seq: 3, n: 1, base: 3},
		{name: "duplicate of the replayed", seq: 7, n: 1, base: 7},
	})
	if got := f2.NextProducerID(); got != id+2 {
		t.Fatalf("next producer id %d after restore, want %d", got, id+2)
	}
	run(f2, []step{
		{name: "8", seq: 8, n: 1, base: 8},
		{name: "new epoch not at 0", epoch: 1, seq: 3, n: 1, base: -1, err: backend.ErrOutOfOrderSequence},
		{name: "new epoch at 0", epoch: 1, seq: 0, n: 1, base: 9},
		{name: "fenced epoch", epoch: 0, seq: 9, n: 1, base: -1, err: backend.ErrInvalidProducerEpoch},
		{name: "duplicate in the new epoch", epoch: 1, seq: 0, n: 1, base: 9},
	})
	// A day later the producer is unknown: any sequence is taken, a
	// retry of its last batch included (as Kafka does).
	now += int64(ProducerIDExpiration)
	run(f2, []step{{name: "expired: retry appended again", epoch: 1, seq: 0, n: 1, base: 10}})
	now += int64(ProducerIDExpiration)
	run(f2, []step{{name: "expired: gap taken", epoch: 1, seq: 40, n: 1, base: 11}})
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}

	// A backup restored into a new cluster hands out ids above the
	// restore second's base, never the backup's next ones again.
	at := time.Unix(1_800_000_000, 0)
	var fresh bytes.Buffer
	if err := ForNewCluster(&fresh, bytes.NewReader(sink.Bytes()), at, "r1"); err != nil {
		t.Fatal(err)
	}
	f2.Close()
	f3, _ := testFSM(t, dir)
	if err := f3.Restore(io.NopCloser(&fresh)); err != nil {
		t.Fatal(err)
	}
	if got := init(f3); got != ProducerIDRestoreBase(at) || got <= id+1 {
		t.Fatalf("id after a restore at %v: %d, want %d", at, got, ProducerIDRestoreBase(at))
	}
}

// TestProducerStateBound: a partition keeps at most
// MaxProducersPerPartition producers, evicting the one idle longest.
func TestProducerStateBound(t *testing.T) {
	var s producerState
	b := idempotentBatch(t, 0, 0, 0, 1)
	for i := range int64(MaxProducersPerPartition + 1) {
		info, _ := batchPeek(b, i)
		s.record(&info, i, i)
	}
	if len(s.m) != MaxProducersPerPartition {
		t.Fatalf("%d producers kept", len(s.m))
	}
	if s.m[0] != nil || s.m[1] == nil || s.m[MaxProducersPerPartition] == nil {
		t.Fatal("the producer idle longest was not the one evicted")
	}
}

// batchPeek peeks b as if producer id had sent it.
func batchPeek(b []byte, id int64) (info batch.Info, err error) {
	info, err = batch.Peek(b)
	info.ProducerID = id
	return info, err
}
