package redrive

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// The jobs against a real node (a leader change mid-job, a batch written
// but not committed, the filters, a stop) are tested in package
// replication (redrive_test.go); these tests cover what the package
// decides alone.

// TestIdempotencyKey pins the key's format: the keys of a batch written
// by one build must be found by the next leader's, whatever its build.
func TestIdempotencyKey(t *testing.T) {
	if got, want := IdempotencyKey("orders-dlq", 3, 42), "logd-redrive/orders-dlq/3/42"; got != want {
		t.Fatalf("IdempotencyKey = %q, want %q", got, want)
	}
}

// deadLetter is a dead letter at offset off as a queue group writes it,
// with extra headers appended.
func deadLetter(off int64, extra ...batch.Header) batch.Record {
	h := []batch.Header{
		{Key: "app", Value: []byte("kept")},
		{Key: backend.DLQHeaderReason, Value: []byte("rejected")},
		{Key: backend.DLQHeaderTopic, Value: []byte("orders")},
		{Key: backend.DLQHeaderPartition, Value: []byte("2")},
		{Key: backend.DLQHeaderOffset, Value: []byte("7")},
		{Key: backend.DLQHeaderHistory, Value: []byte(`{"version":1,"attempts":[]}`)},
	}
	return batch.Record{Offset: off, Key: []byte("k"), Value: []byte("v"), Headers: append(h, extra...)}
}

func TestRecord(t *testing.T) {
	history := batch.Header{Key: fsm.RedriveHeaderHistory, Value: []byte(`{"version":1,"attempts":[]}`)}
	for _, tc := range []struct {
		name    string
		spec    fsm.RedriveSpec
		rec     batch.Record
		ok      bool
		target  string
		part    int32 // -1: routed by key
		headers []batch.Header
	}{
		{name: "to its origin", spec: fsm.RedriveSpec{DeadLetterTopic: "dlq"}, rec: deadLetter(5), ok: true, target: "orders", part: 2,
			headers: []batch.Header{{Key: "app", Value: []byte("kept")}, history, {Key: backend.RedriveHeaderCount, Value: []byte("1")}}},
		{name: "to a target", spec: fsm.RedriveSpec{DeadLetterTopic: "dlq", Target: "elsewhere"}, rec: deadLetter(5), ok: true, target: "elsewhere", part: -1,
			headers: []batch.Header{{Key: "app", Value: []byte("kept")}, history, {Key: backend.RedriveHeaderCount, Value: []byte("1")}}},
		{name: "redriven before, with its original key", spec: fsm.RedriveSpec{DeadLetterTopic: "dlq"},
			rec: deadLetter(5,
				batch.Header{Key: backend.DLQHeaderIdempotencyKey, Value: []byte("order-1")},
				batch.Header{Key: backend.RedriveHeaderCount, Value: []byte("2")},
				batch.Header{Key: fsm.RedriveHeaderHistory, Value: []byte("old")},
			), ok: true, target: "orders", part: 2,
			headers: []batch.Header{{Key: "app", Value: []byte("kept")}, history, {Key: backend.RedriveHeaderCount, Value: []byte("3")},
				{Key: backend.RedriveHeaderKey, Value: []byte("order-1")}}},
		{name: "no origin, no target", spec: fsm.RedriveSpec{DeadLetterTopic: "dlq"},
			rec: batch.Record{Offset: 5, Headers: []batch.Header{{Key: backend.DLQHeaderReason, Value: []byte("rejected")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := backend.ParseDeadLetter(tc.rec)
			target, rec, ok := Record(tc.spec, 4, tc.rec, d)
			if ok != tc.ok || target != tc.target {
				t.Fatalf("Record = %q, %v; want %q, %v", target, ok, tc.target, tc.ok)
			}
			if !ok {
				return
			}
			if rec.IdempotencyKey != IdempotencyKey("dlq", 4, 5) {
				t.Errorf("idempotency key %q, want the dead letter's", rec.IdempotencyKey)
			}
			if string(rec.Key) != "k" || string(rec.Value) != "v" {
				t.Errorf("key %q, value %q", rec.Key, rec.Value)
			}
			part := int32(-1)
			if rec.HasPartition {
				part = rec.Partition
			}
			if part != tc.part {
				t.Errorf("partition %d, want %d", part, tc.part)
			}
			if !reflect.DeepEqual(rec.Headers, tc.headers) {
				t.Errorf("headers %q, want %q", rec.Headers, tc.headers)
			}
			// The record depends on the dead letter alone: built again
			// (by the next leader), it is the same.
			if _, again, _ := Record(tc.spec, 4, tc.rec, backend.ParseDeadLetter(tc.rec)); !reflect.DeepEqual(again, rec) {
				t.Errorf("built again: %+v, first %+v", again, rec)
			}
		})
	}
}

// node is a node for the runner's lifecycle: it leads while leads is set,
// reads its dead-letter partition empty, and hands every proposal to
// proposed, then blocks it until its context ends.
type node struct {
	leads    atomic.Bool
	proposed chan proposal
}

type proposal struct {
	ctx context.Context
	c   fsm.Redrive
}

func (n *node) Leads() bool { return n.leads.Load() }

func (n *node) Read(topic string, partition int32, offset int64, maxBytes int) (backend.ReadResult, error) {
	return backend.ReadResult{EndOffset: 10}, nil
}

func (n *node) Offsets(ctx context.Context, topic string, partition int32) (backend.Offsets, error) {
	return backend.Offsets{End: 10}, nil
}

func (n *node) Produce(ctx context.Context, req backend.ProduceRequest) (backend.ProduceResult, error) {
	return backend.ProduceResult{}, errors.New("nothing to produce")
}

func (n *node) ProposeRedrive(ctx context.Context, c fsm.Redrive) (fsm.RedriveJob, error) {
	n.proposed <- proposal{ctx, c}
	<-ctx.Done()
	return fsm.RedriveJob{}, ctx.Err()
}

// state holds one job, running, over ten dead-letter offsets.
type state struct{ job fsm.RedriveJob }

func (s state) Topic(name string) (*fsm.Topic, error)     { return nil, backend.ErrUnknownTopic }
func (s state) ValidateRedriveSpec(fsm.RedriveSpec) error { return nil }
func (s state) RedriveJob(id string) (fsm.RedriveJob, error) {
	if id != s.job.ID {
		return fsm.RedriveJob{}, fmt.Errorf("%w: %s", backend.ErrUnknownRedrive, id)
	}
	return s.job, nil
}
func (s state) RedriveJobs() []fsm.RedriveJob { return []fsm.RedriveJob{s.job} }
func (s state) ConsumerGroup(name string) (*group.ConsumerGroup, error) {
	return nil, group.ErrConsumerGroupNotFound
}

// TestRunLifecycle: a worker runs a job only while the node leads, is
// cancelled when it stops leading, and Run returns, after its workers,
// when its context ends (TestMain checks no goroutine is left).
func TestRunLifecycle(t *testing.T) {
	n := &node{proposed: make(chan proposal)}
	n.leads.Store(true)
	job := fsm.RedriveJob{ID: "rd1", State: fsm.RedriveRunning, Spec: fsm.RedriveSpec{DeadLetterTopic: "dlq", Ends: []int64{10}}}
	r := New(n, state{job: job}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	wait := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: timed out", what)
		}
	}
	// The partition reads empty below its end: the worker advances the
	// position past it, counting the offsets scanned and skipped.
	advance := func(what string) context.Context {
		t.Helper()
		select {
		case p := <-n.proposed:
			want := fsm.RedriveProgress{Scanned: 10, Skipped: 10}
			if p.c.Op != fsm.RedriveAdvance || p.c.ID != job.ID || p.c.Delta != want || len(p.c.Offsets) != 1 || p.c.Offsets[0].Offset != 10 {
				t.Fatalf("%s: proposed %+v, want an advance to 10 with %+v", what, p.c, want)
			}
			return p.ctx
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no advance proposed", what)
		}
		return nil
	}
	first := advance("while leading")
	n.leads.Store(false)
	wait("worker cancelled when the node stopped leading", first.Done())
	n.leads.Store(true)
	second := advance("when leading again")
	cancel()
	wait("worker cancelled with Run's context", second.Done())
	wait("Run returned", done)
}
