package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/retention"
)

// TestQueueAdmissionAndProtection drives a queue topic with a backlog bound
// of 3 records: an append past it is refused whole and changes nothing,
// an append that fits after the group finished work is admitted, the same
// script replays to the same state, and retention is clamped at the lowest
// unfinished offset.
func TestQueueAdmissionAndProtection(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(mustJSON(t, CmdCreateTopic, qnow, CreateTopic{Name: "jobs", Partitions: 1,
		Config: map[string]string{ConfigQueueMaxBacklogRecords: "3", ConfigSegmentBytes: "100"}}))
	topic, _ := f.Topic("jobs")
	if got := f.ProtectedFrom(topic, 0); got != retention.NoProtection {
		t.Fatalf("ProtectedFrom without groups = %d", got)
	}
	// Without a group, nothing is bounded.
	if res := a.apply(appendCmd(t, qnow, "jobs", 0, "a", "b", "c", "d")); isErr(res) {
		t.Fatal(res)
	}
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s"), FromEnd: true}))
	steps := []struct {
		name    string
		cmd     func() any
		wantErr error
		end     int64
	}{
		{name: "fits", cmd: func() any { return a.apply(appendCmd(t, qnow, "jobs", 0, "e", "f")) }, end: 6},
		{name: "past the bound", cmd: func() any { return a.apply(appendCmd(t, qnow, "jobs", 0, "g", "h")) }, wantErr: backend.ErrOverloaded, end: 6},
		{name: "larger than the bound", cmd: func() any { return a.apply(appendCmd(t, qnow, "jobs", 0, "1", "2", "3", "4")) }, wantErr: backend.ErrInvalidArgument, end: 6},
		{name: "after an ack", cmd: func() any {
			c := a.claim(qnow+1, 1, time.Second)
			a.tokens(CmdQueueAck, qnow+2, QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{c.Records[0].Token}})
			return a.apply(appendCmd(t, qnow+3, "jobs", 0, "g", "h"))
		}, end: 8},
		{name: "full again", cmd: func() any { return a.apply(appendCmd(t, qnow+4, "jobs", 0, "i")) }, wantErr: backend.ErrOverloaded, end: 8},
	}
	for _, s := range steps {
		res := s.cmd()
		err, _ := res.(error)
		if s.wantErr == nil && err != nil || s.wantErr != nil && !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: result %v, want %v", s.name, res, s.wantErr)
		}
		if got := topic.Partitions[0].Log().EndOffset(); got != s.end {
			t.Fatalf("%s: end offset %d, want %d", s.name, got, s.end)
		}
	}
	var oe *backend.OverloadedError
	if err, _ := steps[1].cmd().(error); !errors.As(err, &oe) || oe.Group != "w" || oe.Backlog != 3 || oe.Limit != 3 {
		t.Fatalf("overloaded error = %v", err)
	}
	// Offsets 0-3 predate the group; 4 is acked; 5 is the first unfinished.
	if got := f.ProtectedFrom(topic, 0); got != 5 {
		t.Fatalf("ProtectedFrom = %d, want 5", got)
	}
	res := a.apply(mustJSON(t, CmdTrim, qnow+5, Trim{Topic: "jobs", TopicIndex: topic.CreateIndex, Partition: 0, Below: 8}))
	if err, ok := res.(error); ok {
		t.Fatal(err)
	}
	if start := topic.Partitions[0].Log().StartOffset(); start > 5 {
		t.Fatalf("trim deleted unfinished records: log start %d", start)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
	// Replay the same entries on a fresh state machine, as a follower
	// does: the same verdicts give the same end offset and protection.
	f2, fatals2 := testFSM(t, t.TempDir())
	b := &applier{t: t, f: f2}
	for _, cmd := range a.log {
		b.apply(cmd)
	}
	topic2, _ := f2.Topic("jobs")
	if end, pf := topic2.Partitions[0].Log().EndOffset(), f2.ProtectedFrom(topic2, 0); end != 8 || pf != 5 || len(*fatals2) != 0 {
		t.Fatalf("replay: end %d, protected from %d, fatals %v", end, pf, *fatals2)
	}
}

func isErr(v any) bool { _, ok := v.(error); return ok }
