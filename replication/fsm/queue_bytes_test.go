package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// TestQueueExactBytes: below QueueLevel the byte bound counts the
// estimate (batch bytes), so one 60-byte record "can never fit" a
// 100-byte bound; the first claim in the QueueLevel payload raises the
// applied level, the group sizes its backlog from the log (a 40-byte value
// counts 40), and from then on the bound counts record sizes exactly, up
// to the byte. A replay decides the same.
func TestQueueExactBytes(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(mustJSON(t, CmdCreateTopic, qnow, CreateTopic{Name: "jobs", Partitions: 1,
		Config: map[string]string{ConfigQueueMaxBacklogBytes: "100"}}))
	valueAppend := func(now int64, n int) []byte {
		return encodeAppend(now, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, strings.Repeat("v", n))}}})
	}
	if res := a.apply(valueAppend(qnow, 40)); isErr(res) {
		t.Fatal(res)
	}
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")}))
	if err, _ := a.apply(valueAppend(qnow, 60)).(error); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("below QueueLevel: append of 60 bytes = %v, want the estimate's refusal", err)
	}
	res := a.apply(queueCmd(t, CmdQueueClaim, qnow+1, QueueClaim{Topic: "jobs", Group: "w", Max: 1, Worker: "w1"}))
	if c, ok := res.(backend.QueueClaimResult); !ok || len(c.Records) != 1 {
		t.Fatalf("claim = %v", res)
	}
	if got := f.AppliedLevel(); got != QueueLevel {
		t.Fatalf("applied level %d after a claim with a worker, want %d", got, QueueLevel)
	}
	if res := a.apply(valueAppend(qnow+2, 60)); isErr(res) {
		t.Fatalf("40 + 60 bytes under a bound of 100: %v", res)
	}
	var oe *backend.OverloadedError
	if err, _ := a.apply(valueAppend(qnow+3, 1)).(error); !errors.As(err, &oe) || oe.Bound != "bytes" || oe.Backlog != 100 || oe.Adding != 1 {
		t.Fatalf("one byte past the bound = %v, want overloaded with backlog 100 adding 1", err)
	}
	topic, _ := f.Topic("jobs")
	if end := topic.Partitions[0].Log().EndOffset(); end != 2 || len(*fatals) != 0 {
		t.Fatalf("end offset %d, fatals %v", end, *fatals)
	}
	f2, fatals2 := testFSM(t, t.TempDir())
	b := &applier{t: t, f: f2}
	for _, cmd := range a.log {
		b.apply(cmd)
	}
	topic2, _ := f2.Topic("jobs")
	if end := topic2.Partitions[0].Log().EndOffset(); end != 2 || len(*fatals2) != 0 {
		t.Fatalf("replay: end offset %d, fatals %v", end, *fatals2)
	}
}

// TestQueueRetryAfterFromDrainRate: a refusal's retry-after is the excess
// over the bound at the group's drain rate, from the replicated counters
// at command times: the same on a replica replaying the log. Two records
// finished in the 4 s since the first sample (0.5/s) and one record is in
// excess: 2 s. With nothing finished yet, the hint is queue.IdleRetryAfter.
func TestQueueRetryAfterFromDrainRate(t *testing.T) {
	f, _ := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(mustJSON(t, CmdCreateTopic, qnow, CreateTopic{Name: "jobs", Partitions: 1,
		Config: map[string]string{ConfigQueueMaxBacklogRecords: "3"}}))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s"), FromEnd: true}))
	a.apply(appendCmd(t, qnow, "jobs", 0, "a", "b", "c"))
	var oe *backend.OverloadedError
	if err, _ := a.apply(appendCmd(t, qnow, "jobs", 0, "x")).(error); !errors.As(err, &oe) || oe.RetryAfter != queue.IdleRetryAfter {
		t.Fatalf("refusal before anything finished = %v (retry after %v), want the idle hint", err, oe.RetryAfter)
	}
	c := a.claim(qnow, 3, time.Minute)
	a.tokens(CmdQueueAck, qnow+int64(time.Second), QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{c.Records[0].Token, c.Records[1].Token}})
	a.apply(appendCmd(t, qnow+int64(2*time.Second), "jobs", 0, "d", "e"))
	refusal := appendCmd(t, qnow+int64(4*time.Second), "jobs", 0, "f")
	check := func(name string, res any) {
		t.Helper()
		var oe *backend.OverloadedError
		if err, _ := res.(error); !errors.As(err, &oe) || oe.DrainPerSec != 0.5 || oe.RetryAfter != 2*time.Second {
			t.Fatalf("%s: refusal = %v (drain %v/s, retry after %v), want 0.5/s and 2s", name, res, oe.DrainPerSec, oe.RetryAfter)
		}
	}
	check("apply", a.apply(refusal))
	f2, _ := testFSM(t, t.TempDir())
	b := &applier{t: t, f: f2}
	for _, cmd := range a.log[:len(a.log)-1] {
		b.apply(cmd)
	}
	check("replay", b.apply(refusal))
}

// TestQueueAdmissionByAge: queue.max.backlog.age.ms refuses a produce
// once the oldest unfinished record was appended more than the bound
// before it (command times): at exactly the bound it is admitted, one
// nanosecond later refused with a retry-after; once the old records are
// finished, produces pass again. The setting is of QueueLevel: its
// create-topic and alter-topic payloads need that level.
func TestQueueAdmissionByAge(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	create, err := EncodeCreateTopic(qnow, CreateTopic{Name: "jobs", Partitions: 1, Config: map[string]string{ConfigQueueMaxBacklogAgeMs: "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if level, _, err := EntryLevel(create); err != nil || level != QueueLevel {
		t.Fatalf("create-topic with the age bound needs level %d, %v; want %d", level, err, QueueLevel)
	}
	a.apply(create)
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s"), FromEnd: true}))
	sec := int64(time.Second)
	steps := []struct {
		name    string
		now     int64
		wantErr error
	}{
		{name: "first record", now: qnow},
		{name: "at exactly the bound", now: qnow + sec},
		{name: "just past the bound", now: qnow + sec + 1, wantErr: backend.ErrOverloaded},
	}
	for _, s := range steps {
		err, _ := a.apply(appendCmd(t, s.now, "jobs", 0, s.name)).(error)
		if s.wantErr == nil && err != nil || s.wantErr != nil && !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.wantErr)
		}
	}
	var oe *backend.OverloadedError
	if err, _ := a.apply(appendCmd(t, qnow+2*sec, "jobs", 0, "x")).(error); !errors.As(err, &oe) || oe.Bound != "age" || oe.Backlog != 2000 || oe.Limit != 1000 || oe.RetryAfter != queue.IdleRetryAfter {
		t.Fatalf("refusal = %v (%+v), want the age bound with the idle retry-after (nothing drained)", err, oe)
	}
	// A paused group's records count too.
	a.apply(mustJSON(t, CmdQueuePause, qnow+2*sec, QueuePause{Topic: "jobs", Group: "w", Paused: true}))
	if err, _ := a.apply(appendCmd(t, qnow+2*sec, "jobs", 0, "y")).(error); !errors.Is(err, backend.ErrOverloaded) {
		t.Fatalf("paused group: %v, want overloaded", err)
	}
	a.apply(mustJSON(t, CmdQueuePause, qnow+2*sec, QueuePause{Topic: "jobs", Group: "w", Paused: false}))
	c := a.claim(qnow+2*sec, 1, time.Minute)
	a.tokens(CmdQueueAck, qnow+3*sec, QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{c.Records[0].Token}})
	// The record appended at 1 s is now the oldest: 2.5 s old at 3.5 s.
	if err, _ := a.apply(appendCmd(t, qnow+3*sec+sec/2, "jobs", 0, "z")).(error); !errors.As(err, &oe) || oe.Backlog != 2500 || oe.RetryAfter == queue.IdleRetryAfter {
		t.Fatalf("after an ack: %v (%+v), want a refusal 2.5 s old with a retry-after from the drain rate", err, oe)
	}
	c = a.claim(qnow+4*sec, 1, time.Minute)
	a.tokens(CmdQueueAck, qnow+4*sec, QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{c.Records[0].Token}})
	if res := a.apply(appendCmd(t, qnow+4*sec, "jobs", 0, "fresh")); isErr(res) {
		t.Fatalf("nothing unfinished: %v", res)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
	alter, err := EncodeAlterTopic(qnow, AlterTopic{Name: "jobs", Delete: []string{ConfigQueueMaxBacklogAgeMs}})
	if err != nil {
		t.Fatal(err)
	}
	if level, _, _ := EntryLevel(alter); level != QueueLevel {
		t.Fatalf("alter-topic deleting the age bound at level %d, want %d", level, QueueLevel)
	}
	v1 := append([]byte(nil), alter...)
	v1[1] = commandVersion
	if _, err := decodeCommandWith(v1, &keyScratch{}); !errors.Is(err, backend.ErrBadCommand) {
		t.Fatalf("alter-topic version 1 with the age bound decodes: %v", err)
	}
}

// TestQueueLevelSixSnapshot: the state of QueueLevel — the applied level,
// exact bytes, append marks, drain samples and a history — survives a
// snapshot and restore: the restored state machine refuses the same append
// with the same figures and writes the same dead letter.
func TestQueueLevelSixSnapshot(t *testing.T) {
	dir := t.TempDir()
	f1, _ := testFSM(t, dir)
	a := &applier{t: t, f: f1}
	create, err := EncodeCreateTopic(qnow, CreateTopic{Name: "jobs", Partitions: 1, Config: map[string]string{
		ConfigQueueMaxBacklogAgeMs: "1000", ConfigQueueMaxBacklogBytes: "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	a.apply(create)
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")}))
	sec := int64(time.Second)
	a.apply(appendCmd(t, qnow, "jobs", 0, "a", "b"))
	c := a.apply(queueCmd(t, CmdQueueClaim, qnow, QueueClaim{Topic: "jobs", Group: "w", Max: 1, Lease: time.Minute, Worker: "w1"})).(backend.QueueClaimResult)
	a.tokens(CmdQueueAck, qnow+sec/2, QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{c.Records[0].Token}})
	c = a.apply(queueCmd(t, CmdQueueClaim, qnow+sec/2, QueueClaim{Topic: "jobs", Group: "w", Max: 1, Lease: time.Minute, Worker: "w2"})).(backend.QueueClaimResult)
	refusal := appendCmd(t, qnow+2*sec, "jobs", 0, "c")
	snap, err := f1.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	f1.Close()
	// What the same commands do without a snapshot: a replica replaying
	// the log.
	f3, _ := testFSM(t, t.TempDir())
	r := &applier{t: t, f: f3}
	for _, cmd := range a.log {
		r.apply(cmd)
	}
	want := fmt.Sprint(r.apply(refusal))
	if !strings.Contains(want, "queue.max.backlog.age.ms=1000") {
		t.Fatalf("refusal: %s", want)
	}
	nack := queueCmd(t, CmdQueueNack, qnow+2*sec, QueueNack{Topic: "jobs", Group: "w", Nacks: []queue.Nack{{Token: c.Records[0].Token, Permanent: true, Error: "bad"}}})
	r.apply(nack)
	wantDL := dlqRecords(t, f3, "jobs.w.dlq")

	f2, _ := testFSM(t, dir)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if f2.AppliedLevel() != QueueLevel {
		t.Fatalf("restored level %d", f2.AppliedLevel())
	}
	b := &applier{t: t, f: f2, index: a.index}
	if got := fmt.Sprint(b.apply(refusal)); got != want {
		t.Fatalf("after restore: %s\nbefore: %s", got, want)
	}
	b.apply(nack)
	gotDL := dlqRecords(t, f2, "jobs.w.dlq")
	if len(gotDL) != 1 || len(wantDL) != 1 || fmt.Sprint(gotDL[0].Headers) != fmt.Sprint(wantDL[0].Headers) {
		t.Fatalf("dead letter after restore:\n%v\nbefore:\n%v", gotDL, wantDL)
	}
	if got := attemptsOf(t, gotDL[0]); strings.Join(got, ",") != "w2:rejected:bad" {
		t.Fatalf("history after restore: %v", got)
	}
}

// TestQueueClaimPayloads: a claim is written without its worker id below
// QueueLevel (payload version 1, which every build reads) and with it from
// that level (version 2, even when empty); both decode back, and a cut
// version 2 payload is a bad command.
func TestQueueClaimPayloads(t *testing.T) {
	c := QueueClaim{Topic: "jobs", Group: "w", Max: 7, MaxBytes: 100, Lease: time.Minute, Worker: "host/42"}
	for _, tc := range []struct {
		name      string
		level     FeatureLevel
		worker    string
		want      QueueClaim
		wantLevel FeatureLevel
	}{
		{name: "below the level", level: ExternalGroupsLevel, worker: "host/42", want: QueueClaim{Topic: "jobs", Group: "w", Max: 7, MaxBytes: 100, Lease: time.Minute}, wantLevel: BaseLevel},
		{name: "at the level", level: QueueLevel, worker: "host/42", want: c, wantLevel: QueueLevel},
		{name: "at the level without a worker", level: QueueLevel, want: QueueClaim{Topic: "jobs", Group: "w", Max: 7, MaxBytes: 100, Lease: time.Minute}, wantLevel: QueueLevel},
	} {
		in := c
		in.Worker = tc.worker
		data := EncodeQueueClaim(qnow, in, tc.level)
		level, _, err := EntryLevel(data)
		if err != nil || level != tc.wantLevel {
			t.Fatalf("%s: entry level %d, %v; want %d", tc.name, level, err, tc.wantLevel)
		}
		env, err := decodeCommandWith(data, &keyScratch{})
		if err != nil || env.Body.(QueueClaim) != tc.want {
			t.Fatalf("%s: decoded %+v, %v; want %+v", tc.name, env.Body, err, tc.want)
		}
		if tc.level >= QueueLevel {
			if _, err := decodeCommandWith(data[:len(data)-1], &keyScratch{}); !errors.Is(err, backend.ErrBadCommand) {
				t.Fatalf("%s: a cut payload decodes: %v", tc.name, err)
			}
		}
	}
}
