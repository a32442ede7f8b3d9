package fsm

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/internal/recordtest"
)

const qnow = int64(1_700_000_000_000_000_000)

func queueCmd(t *testing.T, ct CommandType, now int64, c any) []byte {
	t.Helper()
	b, err := encodeQueueCommand(ct, now, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jobBatch builds records with values and, for values "late:*", a deadline
// header at qnow+1s.
func jobBatch(t *testing.T, values ...string) []byte { return recordtest.JobBatch(t, qnow, values...) }

func appendCmd(t *testing.T, now int64, topic string, p int32, values ...string) []byte {
	return encodeAppend(now, Append{Topic: topic, Batches: []PartitionBatch{{Partition: p, Batch: jobBatch(t, values...)}}})
}

// apply applies one command at the next index and returns its result.
type applier struct {
	t     *testing.T
	f     *FSM
	index uint64
	log   [][]byte
}

func (a *applier) apply(cmd []byte) any {
	a.t.Helper()
	a.index++
	a.log = append(a.log, cmd)
	return a.f.apply(Entry{Index: a.index, Command: true, Data: cmd})
}

func (a *applier) claim(now int64, max int32, lease time.Duration) backend.QueueClaimResult {
	a.t.Helper()
	res := a.apply(queueCmd(a.t, CmdQueueClaim, now, QueueClaim{Topic: "jobs", Group: "w", Max: max, Lease: lease}))
	r, ok := res.(backend.QueueClaimResult)
	if !ok {
		a.t.Fatalf("claim: %v", res)
	}
	return r
}

func (a *applier) tokens(ct CommandType, now int64, c any) []queue.TokenResult {
	a.t.Helper()
	res := a.apply(queueCmd(a.t, ct, now, c))
	r, ok := res.(backend.QueueTokensResult)
	if !ok {
		a.t.Fatalf("%s: %v", ct, res)
	}
	return r.Results
}

func dlqValues(t *testing.T, f *FSM, topic string) []string {
	t.Helper()
	part, err := f.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for off := int64(0); off < part.Log().EndOffset(); {
		data, err := part.Log().Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(data, off, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			out = append(out, fmt.Sprintf("%s key=%s job=%s reason=%s error=%q origin=%s/%s@%s deliveries=%s idem=%s",
				r.Value, r.Key, h["job"], h[backend.DLQHeaderReason], h[backend.DLQHeaderError], h[backend.DLQHeaderTopic], h[backend.DLQHeaderPartition], h[backend.DLQHeaderOffset], h[backend.DLQHeaderDeliveries], h[backend.DLQHeaderIdempotencyKey]))
			off = r.Offset + 1
		}
	}
	return out
}

// TestQueueApply drives a queue group through the FSM: claims carry record
// content and tokens, a stale token changes nothing, a permanent nack and a
// passed deadline land in the automatically created dead-letter topic with
// their reasons, in the same command that finishes the source record.
func TestQueueApply(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "jobs", 1, qnow))
	// The rejected record was produced with an idempotency key: its dead
	// letter names it.
	a.apply(encodeAppend(qnow, Append{Topic: "jobs", Batches: []PartitionBatch{keyed(0, jobBatch(t, "credit:10", "credit:-5", "late:1"), "", "pay-1")}}))
	if res := a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("secret"), Config: queue.Config{MaxDeliveries: 2}})); fmt.Sprint(res) == "" {
		t.Fatal(res)
	}
	if _, err := f.Topic("jobs.w.dlq"); err != nil {
		t.Fatalf("dead-letter topic not created: %v", err)
	}
	c := a.claim(qnow, 2, 5*time.Second)
	if len(c.Records) != 2 || string(c.Records[0].Record.Value) != "credit:10" || string(c.Records[1].Record.Key) != "k-credit:-5" {
		t.Fatalf("claim: %+v", c)
	}
	tok0, tok1 := c.Records[0].Token, c.Records[1].Token
	stale := tok0
	stale.Tag++
	rs := a.tokens(CmdQueueAck, qnow+1, QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{stale, tok0, tok0}})
	if rs[0].Outcome != queue.TokenStale || rs[1].Outcome != queue.TokenOK || rs[2].Outcome != queue.TokenDuplicate {
		t.Fatalf("ack results: %+v", rs)
	}
	rs = a.tokens(CmdQueueNack, qnow+2, QueueNack{Topic: "jobs", Group: "w", Nacks: []queue.Nack{{Token: tok1, Permanent: true, Error: "negative amount"}}})
	if !rs[0].DeadLettered {
		t.Fatalf("nack: %+v", rs)
	}
	// After the deadline: the late record goes to the DLQ without delivery.
	c = a.claim(qnow+int64(2*time.Second), 5, 0)
	if len(c.Records) != 0 || c.DeadLettered != 1 {
		t.Fatalf("claim after deadline: %+v", c)
	}
	got := dlqValues(t, f, "jobs.w.dlq")
	want := []string{
		`credit:-5 key=k-credit:-5 job=credit:-5 reason=rejected error="negative amount" origin=jobs/0@1 deliveries=1 idem=pay-1`,
		`late:1 key=k-late:1 job=late:1 reason=deadline_exceeded error="" origin=jobs/0@2 deliveries=0 idem=`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dead letters:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	info, err := f.DescribeQueueGroup("jobs", "w", qnow+int64(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p := info.Partitions[0]
	if p.Acked != 1 || p.DeadLettered != 2 || p.Start != 3 || p.Ready+p.InFlight+p.Delayed != 0 {
		t.Fatalf("describe: %+v", p)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}

// TestQueueReplayDeterministic re-applies a whole script on a fresh FSM
// over the same directory, as a restart without a snapshot does: the logs
// then hold records appended after each claim, yet every claim must hand
// out the same records with the same tokens, and dead letters must not be
// written twice.
func TestQueueReplayDeterministic(t *testing.T) {
	dir := t.TempDir()
	f1, _ := testFSM(t, dir)
	a := &applier{t: t, f: f1}
	a.apply(createCmd(t, "jobs", 2, qnow))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s"), Config: queue.Config{MaxDeliveries: 1}}))
	var first []string
	record := func(c backend.QueueClaimResult) {
		for _, r := range c.Records {
			first = append(first, fmt.Sprintf("%d@%d %s %s", r.Partition, r.Offset, r.Token, r.Record.Value))
		}
	}
	a.apply(appendCmd(t, qnow, "jobs", 0, "a", "b"))
	record(a.claim(qnow, 1, time.Second))
	a.apply(appendCmd(t, qnow, "jobs", 1, "c"))
	record(a.claim(qnow, 10, time.Second))
	a.apply(appendCmd(t, qnow, "jobs", 0, "d"))
	// Leases expire after the only allowed delivery: dead letters.
	record(a.claim(qnow+int64(2*time.Second), 10, time.Second))
	a.apply(appendCmd(t, qnow, "jobs", 0, "e"))
	dlq1 := dlqValues(t, f1, "jobs.w.dlq")
	if len(dlq1) == 0 {
		t.Fatal("expected dead letters")
	}
	f1.Close()

	f2, fatals := testFSM(t, dir)
	b := &applier{t: t, f: f2}
	var replay []string
	for _, cmd := range a.log {
		res := b.apply(cmd)
		if c, ok := res.(backend.QueueClaimResult); ok {
			for _, r := range c.Records {
				replay = append(replay, fmt.Sprintf("%d@%d %s %s", r.Partition, r.Offset, r.Token, r.Record.Value))
			}
		}
	}
	if fmt.Sprint(first) != fmt.Sprint(replay) {
		t.Fatalf("claims differ on replay:\n%v\n%v", first, replay)
	}
	if dlq2 := dlqValues(t, f2, "jobs.w.dlq"); fmt.Sprint(dlq1) != fmt.Sprint(dlq2) {
		t.Fatalf("dead letters differ on replay:\n%v\n%v", dlq1, dlq2)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}

// TestQueueSnapshotRestore: queue state survives a snapshot and restore
// with delivery counts and live tokens intact.
func TestQueueSnapshotRestore(t *testing.T) {
	dir := t.TempDir()
	f1, _ := testFSM(t, dir)
	a := &applier{t: t, f: f1}
	a.apply(createCmd(t, "jobs", 1, qnow))
	a.apply(appendCmd(t, qnow, "jobs", 0, "a", "b", "c"))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")}))
	c1 := a.claim(qnow, 1, time.Second)
	c2 := a.claim(qnow+int64(time.Second), 1, time.Minute) // redelivery of offset 0
	if c2.Records[0].Offset != 0 || c2.Records[0].Deliveries != 2 {
		t.Fatalf("redelivery: %+v (first %+v)", c2.Records, c1.Records)
	}
	snap, err := f1.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	f1.Close()

	f2, _ := testFSM(t, dir)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	b := &applier{t: t, f: f2, index: a.index}
	rs := b.tokens(CmdQueueAck, qnow+int64(2*time.Second), QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{c1.Records[0].Token, c2.Records[0].Token}})
	if rs[0].Outcome != queue.TokenStale || rs[1].Outcome != queue.TokenOK {
		t.Fatalf("acks after restore: %+v", rs)
	}
	c3 := b.claim(qnow+int64(2*time.Second), 5, 0)
	if len(c3.Records) != 2 || c3.Records[0].Offset != 1 {
		t.Fatalf("claim after restore: %+v", c3.Records)
	}
}
