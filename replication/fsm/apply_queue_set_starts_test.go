package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/queue"
)

// TestQueueSetStartsAndDelete: moving a group's starts and deleting it are
// refused while a lease is live and for a start past the end; once the
// lease ends, the next claim delivers from the new start, and a deleted
// group is gone (a second delete finds no group, and the group can be
// created again). The moved group survives a snapshot.
func TestQueueSetStartsAndDelete(t *testing.T) {
	f, _ := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "jobs", 1, qnow))
	a.apply(appendCmd(t, qnow, "jobs", 0, "a", "b", "c", "d"))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")}))
	a.claim(qnow, 1, time.Second)

	starts := func(now int64, off int64) any {
		return a.apply(mustJSON(t, CmdQueueSetStarts, now, QueueSetStarts{Topic: "jobs", Group: "w", Starts: []queue.PartitionStart{{Partition: 0, Offset: off}}}))
	}
	del := func(now int64) any {
		return a.apply(mustJSON(t, CmdQueueDelete, now, QueueDelete{Topic: "jobs", Group: "w"}))
	}
	for name, res := range map[string]any{"starts": starts(qnow+1, 2), "delete": del(qnow + 1)} {
		if err, _ := res.(error); !errors.Is(err, queue.ErrGroupBusy) {
			t.Fatalf("%s while leased: %v, want ErrGroupBusy", name, res)
		}
	}
	after := qnow + int64(2*time.Second)
	if err, _ := starts(after, 5).(error); !errors.Is(err, queue.ErrInvalidRequest) {
		t.Fatalf("start past the end: %v", err)
	}
	if res := starts(after, 3); res != nil {
		t.Fatalf("starts: %v", res)
	}
	info, err := f.DescribeQueueGroup("jobs", "w", after)
	if err != nil || info.Partitions[0].Start != 3 || info.Backlog.Records != 1 || !info.ExactBytes || info.Backlog.Bytes <= 0 {
		t.Fatalf("after the move: %+v, %v; want start 3 and one record of backlog, its exact bytes", info, err)
	}
	f.queues.mu.RLock()
	snap := f.queues.byTopic["jobs"]["w"].Snapshot()
	f.queues.mu.RUnlock()
	if q, err := queue.Restore(snap); err != nil {
		t.Fatalf("restore after the move: %v", err)
	} else if start, _ := q.PartitionStart(0); start != 3 {
		t.Fatalf("restored start %d, want 3", start)
	}
	c := a.claim(after, 5, time.Second)
	if len(c.Records) != 1 || c.Records[0].Offset != 3 {
		t.Fatalf("claim after the move: %+v", c.Records)
	}
	later := after + int64(2*time.Second)
	if res := del(later); res != nil {
		t.Fatalf("delete: %v", res)
	}
	if got := f.QueueGroups("jobs"); len(got) != 0 {
		t.Fatalf("groups after delete: %v", got)
	}
	if err, _ := del(later).(error); !errors.Is(err, queue.ErrGroupNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if res := a.apply(queueCmd(t, CmdQueueCreate, later, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")})); res == nil {
		t.Fatal("create again: nil")
	} else if err, ok := res.(error); ok {
		t.Fatalf("create again: %v", err)
	}
}
