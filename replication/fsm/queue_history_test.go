package fsm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/queue"
)

// dlqRecords reads every record of partition 0 of a dead-letter topic.
func dlqRecords(t *testing.T, f *FSM, topic string) []batch.Record {
	t.Helper()
	part, err := f.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []batch.Record
	for off := int64(0); off < part.Log().EndOffset(); {
		data, err := part.Log().Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(data, off, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
		off = recs[len(recs)-1].Offset + 1
	}
	return out
}

func header(r batch.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// attemptsOf renders a dead letter's history as "worker:outcome:error"
// per attempt (redrive number prefixed when not 0).
func attemptsOf(t *testing.T, r batch.Record) []string {
	t.Helper()
	v, ok := header(r, backend.DLQHeaderHistory)
	if !ok {
		t.Fatalf("dead letter %s has no %s header", r.Value, backend.DLQHeaderHistory)
	}
	var h dlqHistory
	if err := json.Unmarshal([]byte(v), &h); err != nil || h.Version != 1 {
		t.Fatalf("history %s: %v", v, err)
	}
	var out []string
	for _, a := range h.Attempts {
		s := fmt.Sprintf("%s:%s:%s", a.Worker, a.Outcome, a.Error)
		if a.Redrive > 0 {
			s = fmt.Sprintf("r%d/%s", a.Redrive, s)
		}
		out = append(out, s)
	}
	return out
}

// TestQueueDeadLetterHistory: at QueueLevel a dead letter tells each
// attempt — a lease that expired (its worker killed), a transient nack, a
// permanent reject — with its worker; a redriven record carries that
// history back and its next dead letter appends to it; a record whose
// deadline header cannot be read is dead-lettered as invalid_deadline
// without a delivery. Below the level (claims without a worker id), dead
// letters carry no history and an unreadable deadline is no deadline.
func TestQueueDeadLetterHistory(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "jobs", 1, qnow))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s"), Config: queue.Config{MaxDeliveries: 5}}))
	sec := int64(time.Second)
	claim := func(now int64, worker string) []backend.ClaimedRecord {
		t.Helper()
		res := a.apply(queueCmd(t, CmdQueueClaim, now, QueueClaim{Topic: "jobs", Group: "w", Max: 1, Lease: time.Second, Worker: worker}))
		c, ok := res.(backend.QueueClaimResult)
		if !ok {
			t.Fatalf("claim: %v", res)
		}
		return c.Records
	}
	nack := func(now int64, tok queue.Token, permanent bool, msg string) {
		t.Helper()
		a.tokens(CmdQueueNack, now, QueueNack{Topic: "jobs", Group: "w", Nacks: []queue.Nack{{Token: tok, Permanent: permanent, HasDelay: true, Error: msg}}})
	}
	a.apply(appendCmd(t, qnow, "jobs", 0, "pay-7"))
	claim(qnow, "host-a/1") // killed: its lease expires
	r := claim(qnow+2*sec, "host-b/2")
	nack(qnow+2*sec, r[0].Token, false, "ledger timeout")
	r = claim(qnow+3*sec, "host-c/3")
	nack(qnow+3*sec, r[0].Token, true, "negative amount")
	dl := dlqRecords(t, f, "jobs.w.dlq")
	want := []string{"host-a/1:lease_expired:", "host-b/2:nacked:ledger timeout", "host-c/3:rejected:negative amount"}
	if len(dl) != 1 || strings.Join(attemptsOf(t, dl[0]), " | ") != strings.Join(want, " | ") {
		t.Fatalf("dead letters %d, history %v, want %v", len(dl), attemptsOf(t, dl[0]), want)
	}
	// A redrive (a redrive job, package replication/redrive) produces the record back with its history.
	hist, _ := header(dl[0], backend.DLQHeaderHistory)
	redriven, err := batch.Build([]batch.Record{{Timestamp: qnow / 1e6, Key: dl[0].Key, Value: dl[0].Value, Headers: []batch.Header{
		{Key: redriveCountHeader, Value: []byte("1")}, {Key: RedriveHeaderHistory, Value: []byte(hist)}}}})
	if err != nil {
		t.Fatal(err)
	}
	a.apply(encodeAppend(qnow+4*sec, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: redriven}}}))
	r = claim(qnow+4*sec, "host-d/4")
	nack(qnow+4*sec, r[0].Token, true, "still negative")
	dl = dlqRecords(t, f, "jobs.w.dlq")
	want = append(want, "r1/host-d/4:rejected:still negative")
	if len(dl) != 2 || strings.Join(attemptsOf(t, dl[1]), " | ") != strings.Join(want, " | ") {
		t.Fatalf("after a redrive: history %v, want %v", attemptsOf(t, dl[1]), want)
	}
	if _, ok := header(dl[1], RedriveHeaderHistory); ok {
		t.Fatalf("the redrive history header is kept beside the merged one")
	}
	// An unreadable deadline.
	bad, err := batch.Build([]batch.Record{{Timestamp: qnow / 1e6, Value: []byte("bad"), Headers: []batch.Header{{Key: "deadline", Value: []byte("tomorrow")}}}})
	if err != nil {
		t.Fatal(err)
	}
	a.apply(encodeAppend(qnow+5*sec, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: bad}}}))
	if r := claim(qnow+5*sec, "host-e/5"); len(r) != 0 {
		t.Fatalf("a record with an unreadable deadline was delivered")
	}
	dl = dlqRecords(t, f, "jobs.w.dlq")
	if reason, _ := header(dl[2], backend.DLQHeaderReason); len(dl) != 3 || reason != queue.ReasonInvalidDeadline || strings.Join(attemptsOf(t, dl[2]), "") != ":invalid_deadline:" {
		t.Fatalf("unreadable deadline: reason %q, history %v", reason, attemptsOf(t, dl[2]))
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}

	// Below QueueLevel: no history, an unreadable deadline is none.
	f2, _ := testFSM(t, t.TempDir())
	b := &applier{t: t, f: f2}
	b.apply(createCmd(t, "jobs", 1, qnow))
	b.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")}))
	b.apply(encodeAppend(qnow, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: bad}}}))
	c := b.claim(qnow, 1, time.Second)
	if len(c.Records) != 1 {
		t.Fatalf("below QueueLevel a record with an unreadable deadline is delivered; got %d", len(c.Records))
	}
	b.tokens(CmdQueueNack, qnow, QueueNack{Topic: "jobs", Group: "w", Nacks: []queue.Nack{{Token: c.Records[0].Token, Permanent: true}}})
	if dl := dlqRecords(t, f2, "jobs.w.dlq"); len(dl) != 1 {
		t.Fatalf("dead letters %d", len(dl))
	} else if _, ok := header(dl[0], backend.DLQHeaderHistory); ok || f2.AppliedLevel() >= QueueLevel {
		t.Fatalf("below QueueLevel a dead letter has a history")
	}
}
