package fsm

import (
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// TestQueuePause: a paused group delivers nothing while a lease given
// before the pause can still be acked; the pause survives a snapshot;
// resume delivers again.
func TestQueuePause(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "jobs", 1, qnow))
	a.apply(appendCmd(t, qnow, "jobs", 0, "a", "b", "c"))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")}))
	c := a.claim(qnow, 1, time.Minute)
	pause := func(now int64, p bool) backend.QueuePauseResult {
		t.Helper()
		res, ok := a.apply(mustJSON(t, CmdQueuePause, now, QueuePause{Topic: "jobs", Group: "w", Paused: p})).(backend.QueuePauseResult)
		if !ok {
			t.Fatal("pause failed")
		}
		return res
	}
	if r := pause(qnow+1, true); !r.Paused || !r.Changed {
		t.Fatalf("pause: %+v", r)
	}
	if r := pause(qnow+2, true); !r.Paused || r.Changed {
		t.Fatalf("second pause: %+v", r)
	}
	if got := a.claim(qnow+3, 5, time.Minute); len(got.Records) != 0 {
		t.Fatalf("paused group delivered %d records", len(got.Records))
	}
	if ok, _, _ := f.QueueClaimable("jobs", "w", qnow+3); ok {
		t.Fatal("paused group claimable")
	}
	rs := a.tokens(CmdQueueAck, qnow+4, QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{c.Records[0].Token}})
	if rs[0].Outcome != queue.TokenOK {
		t.Fatalf("ack while paused: %+v", rs)
	}
	f.queues.mu.RLock()
	snap := f.queues.byTopic["jobs"]["w"].Snapshot()
	f.queues.mu.RUnlock()
	if q, err := queue.Restore(snap); err != nil || !q.Paused() {
		t.Fatalf("restored paused=%v err=%v", q != nil && q.Paused(), err)
	}
	info, _ := f.DescribeQueueGroup("jobs", "w", qnow+5)
	if p := info.Partitions[0]; p.Acked != 1 || p.Ready != 2 {
		t.Fatalf("counts while paused: %+v", p)
	}
	pause(qnow+6, false)
	if got := a.claim(qnow+7, 5, time.Minute); len(got.Records) != 2 {
		t.Fatalf("resumed group delivered %d records, want 2", len(got.Records))
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}
