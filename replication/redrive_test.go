package replication

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/redrive"
)

// dlqRecord is a dead letter as a queue group writes it, for tests: key
// k and value v from origin (topic, partition), with reason and time.
func dlqRecord(k, v, origin string, part int32, reason string, at time.Time, redrives int) backend.ProduceRecord {
	h := []batch.Header{
		{Key: "app", Value: []byte("kept")},
		{Key: backend.DLQHeaderReason, Value: []byte(reason)},
		{Key: backend.DLQHeaderTopic, Value: []byte(origin)},
		{Key: backend.DLQHeaderPartition, Value: []byte(strconv.Itoa(int(part)))},
		{Key: backend.DLQHeaderOffset, Value: []byte("0")},
		{Key: backend.DLQHeaderDeadLetteredAt, Value: []byte(at.UTC().Format(time.RFC3339Nano))},
		{Key: backend.DLQHeaderHistory, Value: []byte(`{"version":1,"attempts":[]}`)},
	}
	if redrives > 0 {
		h = append(h, batch.Header{Key: backend.RedriveHeaderCount, Value: []byte(strconv.Itoa(redrives))})
	}
	return backend.ProduceRecord{Key: []byte(k), Value: []byte(v), Headers: h}
}

func produceDLQ(t *testing.T, ctx context.Context, b *Backend, topic string, recs ...backend.ProduceRecord) {
	t.Helper()
	for len(recs) > 0 {
		n := min(len(recs), 100)
		if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: topic, Records: recs[:n]}); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
}

// topicValues reads every record of every partition of topic on n.
func topicValues(t *testing.T, n *Node, topic string) []batch.Record {
	t.Helper()
	tp, err := n.FSM().Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []batch.Record
	for i := range tp.Partitions {
		b := NewBackend(n)
		for off := int64(0); ; {
			rd, err := b.Read(topic, int32(i), off, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := batch.Records(rd.Batches, off, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			out = append(out, recs...)
			off = recs[len(recs)-1].Offset + 1
		}
	}
	return out
}

func waitJob(t *testing.T, ctx context.Context, n *Node, id string, cond func(fsm.RedriveJob) bool) fsm.RedriveJob {
	t.Helper()
	for {
		j, err := n.FSM().RedriveJob(id)
		if err == nil && cond(j) {
			return j
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redrive %s: %+v, %v: %v", id, j, err, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestRedriveLeaderChange: the leader is cut off in the middle of a
// redrive; the new leader resumes the job from its last committed batch,
// and every dead letter ends in its origin exactly once (a batch written
// but not committed is answered as duplicates), the counters adding up.
func TestRedriveLeaderChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newMemCluster(t, ctx, 3)
	leader := c.nodes[0]
	for _, tc := range []fsm.CreateTopic{{Name: "orders", Partitions: 2}, {Name: "orders-dlq", Partitions: 2}} {
		if _, err := NewBackend(leader).createTopic(ctx, tc); err != nil {
			t.Fatal(err)
		}
	}
	const total = 400
	var recs []backend.ProduceRecord
	at := time.Unix(1_700_000_000, 0)
	for i := range total {
		recs = append(recs, dlqRecord(fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i), "orders", int32(i%2), "max_deliveries", at, 0))
	}
	produceDLQ(t, ctx, NewBackend(leader), "orders-dlq", recs...)
	// The followers joined without registering a level: a job cannot
	// start until each runs a build that knows redrive jobs.
	var fe *backend.FeatureLevelError
	if _, err := leader.redrive.Start(ctx, fsm.RedriveSpec{DeadLetterTopic: "orders-dlq"}); !errors.As(err, &fe) || fe.Need != backend.FeatureLevel(fsm.RedriveLevel) {
		t.Fatalf("redrive in a base-level cluster: %v", err)
	}
	// At the level of redrive jobs, a job naming its records waits for
	// the level that reads them.
	for _, nd := range c.nodes[1:] {
		if err := leader.register(ctx, fsm.NodeRegister{ID: nd.NodeID(), APIAddress: nd.NodeID() + "-api", FeatureLevel: fsm.RedriveLevel}); err != nil {
			t.Fatal(err)
		}
	}
	named := fsm.RedriveSpec{DeadLetterTopic: "orders-dlq", Records: []fsm.RedriveRecord{{Partition: 0, Offset: 0}}}
	if _, err := leader.redrive.Start(ctx, named); !errors.As(err, &fe) || fe.Need != backend.FeatureLevel(fsm.RedriveSelectLevel) || fe.Cluster != backend.FeatureLevel(fsm.RedriveLevel) {
		t.Fatalf("redrive naming records in a cluster at level %d: %v", fsm.RedriveLevel, err)
	}
	if n := len(leader.FSM().RedriveJobs()); n != 0 {
		t.Fatalf("%d jobs after refusals", n)
	}
	for _, nd := range c.nodes[1:] {
		if err := leader.register(ctx, fsm.NodeRegister{ID: nd.NodeID(), APIAddress: nd.NodeID() + "-api", FeatureLevel: fsm.Level}); err != nil {
			t.Fatal(err)
		}
	}
	job, err := leader.redrive.Start(ctx, fsm.RedriveSpec{DeadLetterTopic: "orders-dlq", Rate: 400})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, leader, job.ID, func(j fsm.RedriveJob) bool { return j.Progress.Scanned >= total/4 })
	c.isolate(0, true)
	var next *Node
	c.waitFor(ctx, "a new leader", func() bool {
		for _, nd := range c.nodes[1:] {
			if nd.IsLeader() && nd.Ready() {
				next = nd
				return true
			}
		}
		return false
	})
	j := waitJob(t, ctx, next, job.ID, func(j fsm.RedriveJob) bool { return j.Ended() })
	c.isolate(0, false)
	if j.State != fsm.RedriveDone {
		t.Fatalf("job %+v, want done", j)
	}
	p := j.Progress
	if p.Scanned != total || p.Redriven+p.Duplicates != total || p.Skipped != 0 || p.Refused != 0 {
		t.Fatalf("progress %+v: want %d scanned, redriven + duplicates = %d", p, total, total)
	}
	got := topicValues(t, next, "orders")
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Value)]++
	}
	for i := range total {
		if v := fmt.Sprintf("v%d", i); seen[v] != 1 {
			t.Errorf("%s in orders %d times, want once", v, seen[v])
		}
	}
	if len(got) != total || int64(len(got)) != p.Redriven {
		t.Fatalf("%d records in orders, %d counted redriven, want %d", len(got), p.Redriven, total)
	}
	if pos := next.redrive.Position(j); !slices.Equal(pos, j.Spec.Ends) {
		t.Fatalf("position %v, want the ends %v", pos, j.Spec.Ends)
	}
	t.Logf("progress %+v", p)
}

// TestRedriveFilters: reasons, key, the time range, the offset range, the
// loop guard and a target topic each select what they say, and what a
// redriven record carries back.
func TestRedriveFilters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := openTestNode(t, ctx, t.TempDir())
	defer n.Close()
	b := NewBackend(n)
	for _, tc := range []fsm.CreateTopic{{Name: "o", Partitions: 1}, {Name: "o-dlq", Partitions: 1}, {Name: "elsewhere", Partitions: 3}} {
		if _, err := NewBackend(n).createTopic(ctx, tc); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1_700_000_000, 0)
	produceDLQ(t, ctx, b, "o-dlq",
		dlqRecord("a", "0", "o", 0, "max_deliveries", t0, 0),
		dlqRecord("b", "1", "o", 0, "rejected", t0.Add(time.Minute), 0),
		dlqRecord("a", "2", "o", 0, "rejected", t0.Add(2*time.Minute), 0),
		dlqRecord("c", "3", "o", 0, "max_deliveries", t0.Add(3*time.Minute), 3),
		dlqRecord("c", "4", "o", 0, "expired", t0.Add(4*time.Minute), 1),
	)
	for _, tc := range []struct {
		name   string
		spec   fsm.RedriveSpec
		values []string
		target string
		p      fsm.RedriveProgress
	}{
		{name: "all", spec: fsm.RedriveSpec{}, values: []string{"0", "1", "2", "4"}, p: fsm.RedriveProgress{Scanned: 5, Redriven: 4, Refused: 1}},
		{name: "reason", spec: fsm.RedriveSpec{Reasons: []string{"rejected"}}, values: []string{"1", "2"}, p: fsm.RedriveProgress{Scanned: 5, Redriven: 2, Skipped: 3}},
		{name: "key", spec: fsm.RedriveSpec{Key: "a", HasKey: true}, values: []string{"0", "2"}, p: fsm.RedriveProgress{Scanned: 5, Redriven: 2, Skipped: 3}},
		{name: "time", spec: fsm.RedriveSpec{SinceMs: t0.Add(time.Minute).UnixMilli(), UntilMs: t0.Add(3 * time.Minute).UnixMilli()}, values: []string{"1", "2"},
			p: fsm.RedriveProgress{Scanned: 5, Redriven: 2, Skipped: 3}},
		{name: "offsets", spec: fsm.RedriveSpec{FromOffset: 1, ToOffset: 3}, values: []string{"1", "2"}, p: fsm.RedriveProgress{Scanned: 2, Redriven: 2}},
		{name: "max redrives", spec: fsm.RedriveSpec{MaxRedrives: 1, ToOffset: 5}, values: []string{"0", "1", "2"}, p: fsm.RedriveProgress{Scanned: 5, Redriven: 3, Refused: 2}},
		{name: "records", spec: fsm.RedriveSpec{Records: []fsm.RedriveRecord{{Partition: 0, Offset: 4}, {Partition: 0, Offset: 1}, {Partition: 0, Offset: 3}}},
			values: []string{"1", "4"}, p: fsm.RedriveProgress{Scanned: 5, Redriven: 2, Refused: 1, Skipped: 2}},
		{name: "records and filter", spec: fsm.RedriveSpec{Records: []fsm.RedriveRecord{{Partition: 0, Offset: 1}, {Partition: 0, Offset: 2}}, Key: "a", HasKey: true},
			values: []string{"2"}, p: fsm.RedriveProgress{Scanned: 5, Redriven: 1, Skipped: 4}},
		{name: "target", spec: fsm.RedriveSpec{Target: "elsewhere", Reasons: []string{"expired"}}, target: "elsewhere", values: []string{"4"},
			p: fsm.RedriveProgress{Scanned: 5, Redriven: 1, Skipped: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			if target == "" {
				target = "o"
				// A fresh origin per case: delete and create it again.
				if err := NewBackend(n).deleteTopic(ctx, "o"); err != nil {
					t.Fatal(err)
				}
				if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "o", Partitions: 1}); err != nil {
					t.Fatal(err)
				}
			}
			tc.spec.DeadLetterTopic = "o-dlq"
			job, err := n.redrive.Start(ctx, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			j := waitJob(t, ctx, n, job.ID, func(j fsm.RedriveJob) bool { return j.Ended() })
			if j.State != fsm.RedriveDone {
				t.Fatalf("job %+v", j)
			}
			var got []string
			for _, r := range topicValues(t, n, target) {
				got = append(got, string(r.Value))
				if target != "o" {
					continue
				}
				hs := map[string]string{}
				for _, h := range r.Headers {
					hs[h.Key] = string(h.Value)
				}
				if hs["app"] != "kept" || hs[fsm.RedriveHeaderHistory] == "" || hs[backend.RedriveHeaderCount] == "" || hs[backend.DLQHeaderReason] != "" {
					t.Errorf("redriven headers %v", hs)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.values) {
				t.Errorf("%s holds %v, want %v", target, got, tc.values)
			}
			wantBytes := int64(0)
			for _, v := range tc.values {
				wantBytes += int64(len(v)) + 1 // keys are one byte
			}
			tc.p.Bytes = wantBytes
			if j.Progress != tc.p {
				t.Errorf("progress %+v, want %+v", j.Progress, tc.p)
			}
		})
	}
	// The same dead letters redriven again within the window: duplicates,
	// nothing written twice.
	job, err := n.redrive.Start(ctx, fsm.RedriveSpec{DeadLetterTopic: "o-dlq", Target: "elsewhere", Reasons: []string{"expired"}})
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, ctx, n, job.ID, func(j fsm.RedriveJob) bool { return j.Ended() })
	if j.Progress.Duplicates != 1 || j.Progress.Redriven != 0 || len(topicValues(t, n, "elsewhere")) != 1 {
		t.Fatalf("second run %+v", j.Progress)
	}
}

// TestRedriveUncommittedBatch: a batch a leader wrote but did not commit
// (its records in the target, the position still before them) is
// answered as duplicates when the job writes it again: each dead letter
// ends in its origin once.
func TestRedriveUncommittedBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := openTestNode(t, ctx, t.TempDir())
	defer n.Close()
	b := NewBackend(n)
	for _, tc := range []fsm.CreateTopic{{Name: "o", Partitions: 2}, {Name: "o-dlq", Partitions: 1}} {
		if _, err := NewBackend(n).createTopic(ctx, tc); err != nil {
			t.Fatal(err)
		}
	}
	var recs []backend.ProduceRecord
	for i := range 10 {
		recs = append(recs, dlqRecord(fmt.Sprintf("k%d", i), strconv.Itoa(i), "o", int32(i%2), "rejected", time.Unix(1_700_000_000, 0), 0))
	}
	produceDLQ(t, ctx, b, "o-dlq", recs...)
	// What the earlier leader wrote of its first batch: dead letters 0-3,
	// as the job writes them.
	spec := fsm.RedriveSpec{DeadLetterTopic: "o-dlq"}
	for _, r := range topicValues(t, n, "o-dlq")[:4] {
		target, rec, ok := redrive.Record(spec, 0, r, backend.ParseDeadLetter(r))
		if !ok {
			t.Fatalf("no record for %+v", r)
		}
		if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: target, Records: []backend.ProduceRecord{rec}}); err != nil {
			t.Fatal(err)
		}
	}
	job, err := n.redrive.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, ctx, n, job.ID, func(j fsm.RedriveJob) bool { return j.Ended() })
	if j.State != fsm.RedriveDone || j.Progress.Duplicates != 4 || j.Progress.Redriven != 6 {
		t.Fatalf("job %+v, want 4 duplicates and 6 redriven", j)
	}
	seen := map[string]int{}
	for _, r := range topicValues(t, n, "o") {
		seen[string(r.Value)]++
	}
	for i := range 10 {
		if seen[strconv.Itoa(i)] != 1 {
			t.Errorf("%d in o %d times, want once", i, seen[strconv.Itoa(i)])
		}
	}
}

// TestRedriveStopAndBadInput: a stop ends a job after the batch in hand;
// bad input is a typed error and changes nothing.
func TestRedriveStopAndBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := openTestNode(t, ctx, t.TempDir())
	defer n.Close()
	b := NewBackend(n)
	for _, tc := range []fsm.CreateTopic{{Name: "o", Partitions: 1}, {Name: "o-dlq", Partitions: 1}} {
		if _, err := NewBackend(n).createTopic(ctx, tc); err != nil {
			t.Fatal(err)
		}
	}
	var recs []backend.ProduceRecord
	for i := range 50 {
		recs = append(recs, dlqRecord("k", strconv.Itoa(i), "o", 0, "rejected", time.Unix(1_700_000_000, 0), 0))
	}
	produceDLQ(t, ctx, b, "o-dlq", recs...)
	for _, tc := range []struct {
		name string
		spec fsm.RedriveSpec
		err  error
	}{
		{name: "unknown dead-letter topic", spec: fsm.RedriveSpec{DeadLetterTopic: "nope"}, err: backend.ErrUnknownTopic},
		{name: "unknown target", spec: fsm.RedriveSpec{DeadLetterTopic: "o-dlq", Target: "nope"}, err: backend.ErrUnknownTopic},
		{name: "negative rate", spec: fsm.RedriveSpec{DeadLetterTopic: "o-dlq", Rate: -1}, err: backend.ErrInvalidArgument},
		{name: "NaN rate", spec: fsm.RedriveSpec{DeadLetterTopic: "o-dlq", Rate: math.NaN()}, err: backend.ErrInvalidArgument},
		{name: "negative max redrives", spec: fsm.RedriveSpec{DeadLetterTopic: "o-dlq", MaxRedrives: -1}, err: backend.ErrInvalidArgument},
		{name: "empty offsets", spec: fsm.RedriveSpec{DeadLetterTopic: "o-dlq", FromOffset: 5, ToOffset: 5}, err: backend.ErrInvalidArgument},
		{name: "empty time range", spec: fsm.RedriveSpec{DeadLetterTopic: "o-dlq", SinceMs: 10, UntilMs: 5}, err: backend.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := n.redrive.Start(ctx, tc.spec); !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if jobs := n.FSM().RedriveJobs(); len(jobs) != 0 {
				t.Fatalf("jobs after a refused start: %+v", jobs)
			}
		})
	}
	for _, id := range []string{"rd999", "x"} {
		if _, err := n.redrive.Stop(ctx, id); !errors.Is(err, backend.ErrUnknownRedrive) {
			t.Fatalf("stop %s: %v, want backend.ErrUnknownRedrive", id, err)
		}
		if _, err := n.FSM().RedriveJob(id); !errors.Is(err, backend.ErrUnknownRedrive) {
			t.Fatalf("describe %s: %v, want backend.ErrUnknownRedrive", id, err)
		}
	}
	job, err := n.redrive.Start(ctx, fsm.RedriveSpec{DeadLetterTopic: "o-dlq", Rate: 20})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, n, job.ID, func(j fsm.RedriveJob) bool { return j.Progress.Redriven > 0 })
	if _, err := n.redrive.Stop(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	stopped := waitJob(t, ctx, n, job.ID, func(j fsm.RedriveJob) bool { return j.State == fsm.RedriveStopped })
	// The worker ends after the batch in hand: the counters settle.
	time.Sleep(300 * time.Millisecond)
	after, _ := n.FSM().RedriveJob(job.ID)
	if after.Progress.Redriven >= 50 || after.Progress.Redriven > stopped.Progress.Redriven+2 {
		t.Fatalf("after the stop: %+v, at the stop %+v", after.Progress, stopped.Progress)
	}
	if got := len(topicValues(t, n, "o")); int64(got) != after.Progress.Redriven {
		t.Fatalf("%d records in o, %d counted", got, after.Progress.Redriven)
	}
	if j, err := n.redrive.Stop(ctx, job.ID); err != nil || j.State != fsm.RedriveStopped {
		t.Fatalf("second stop: %+v, %v", j, err)
	}
}
