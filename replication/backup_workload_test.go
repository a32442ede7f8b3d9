package replication

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
)

// A workload over every kind of state a backup holds, and the check that
// a restored node holds it all (backup_groups_test.go; the version 1
// fixture of backup_v1_test.go was written by it).

// backupWant is what a workload left, as a restored node must hold it.
type backupWant struct {
	// Records are each topic's partitions' values, by offset.
	Records map[string][][]string `json:"records"`
	// Committed are the consumer group billing's offsets of orders.
	Committed []int64 `json:"committed"`
	// Queue is the queue group jobs/w's state of each partition at
	// DescribedAt (Unix ns; its leases are judged by that time).
	Queue       []queue.PartitionStats `json:"queue"`
	DescribedAt int64                  `json:"described_at"`
	// InFlight are the tokens of the deliveries still leased.
	InFlight []queue.Token `json:"in_flight"`
	// Idempotent is where the record with idempotency key "id-0" went.
	Idempotent backend.RecordResult `json:"idempotent"`
}

// backupWorkloadTopics are the topics backupWorkload makes.
var backupWorkloadTopics = []string{"orders", "jobs", "jobs.w.dlq"}

// backupWorkload makes, through b (a meta leader's), the topics orders and
// jobs of parts partitions each, keyed records (some with idempotency
// keys), a consumer group billing committed half way through orders, and
// a queue group w on jobs with acked, dead-lettered and leased records.
func backupWorkload(ctx context.Context, t *testing.T, b *Backend, parts int) backupWant {
	t.Helper()
	for _, name := range []string{"orders", "jobs"} {
		if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: name, Partitions: int32(parts)}); err != nil {
			t.Fatal(err)
		}
	}
	var recs []backend.ProduceRecord
	for i := range 10 * parts {
		r := backend.ProduceRecord{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "order-%03d", i)}
		if i%4 == 0 {
			r.IdempotencyKey = fmt.Sprintf("id-%d", i)
		}
		recs = append(recs, r)
	}
	res, err := b.Produce(ctx, backend.ProduceRequest{Topic: "orders", Records: recs})
	if err != nil {
		t.Fatalf("produce orders: %v", err)
	}
	want := backupWant{Idempotent: res.Results[0]}
	recs = recs[:0]
	for i := range 4 * parts {
		recs = append(recs, backend.ProduceRecord{Partition: int32(i % parts), HasPartition: true, Value: fmt.Appendf(nil, "job-%03d", i)})
	}
	if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "jobs", Records: recs}); err != nil {
		t.Fatalf("produce jobs: %v", err)
	}

	// The consumer group, committed half way.
	a, err := b.JoinGroup(ctx, backend.GroupJoin{Group: "billing", Member: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60000})
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	var commits []group.OffsetCommit
	for p := range int32(parts) {
		o, err := b.OffsetsLeader(ctx, "orders", p)
		if err != nil {
			t.Fatal(err)
		}
		commits = append(commits, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: "orders", Partition: p}, Offset: o.End / 2})
		want.Committed = append(want.Committed, o.End/2)
	}
	if err := b.CommitGroupOffsets(ctx, backend.GroupCommit{Group: "billing", Member: "m1", Generation: a.Generation, Offsets: commits}); err != nil {
		t.Fatalf("commit: %v", err)
	}

	// The queue group: every job claimed; half acked, two dead-lettered,
	// the rest leased.
	if _, err := b.CreateQueueGroup(ctx, backend.QueueCreate{Topic: "jobs", Group: "w", Config: queue.Config{MaxDeliveries: 3}}); err != nil {
		t.Fatalf("create queue group: %v", err)
	}
	var claimed []backend.ClaimedRecord
	for range 50 {
		if len(claimed) == 4*parts {
			break
		}
		res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 100, Lease: time.Hour, Worker: "w1"}, time.Second, nil)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		claimed = append(claimed, res.Records...)
	}
	if len(claimed) != 4*parts {
		t.Fatalf("claimed %d of %d", len(claimed), 4*parts)
	}
	var acks []queue.Token
	for _, c := range claimed[:2*parts] {
		acks = append(acks, c.Token)
	}
	if _, err := b.QueueAck(ctx, backend.QueueAck{Topic: "jobs", Group: "w", Tokens: acks}); err != nil {
		t.Fatalf("ack: %v", err)
	}
	nacks := []queue.Nack{{Token: claimed[2*parts].Token, Permanent: true, Error: "poison"}, {Token: claimed[2*parts+1].Token, Permanent: true, Error: "poison"}}
	if res, err := b.QueueNack(ctx, backend.QueueNack{Topic: "jobs", Group: "w", Nacks: nacks}); err != nil || res.DeadLettered != 2 {
		t.Fatalf("nack: %+v, %v", res, err)
	}
	for _, c := range claimed[2*parts+2:] {
		want.InFlight = append(want.InFlight, c.Token)
	}
	want.DescribedAt = b.Now().UnixNano()
	want.Queue = describeQueue(t, b, want.DescribedAt)
	want.Records = map[string][][]string{}
	for _, name := range backupWorkloadTopics {
		want.Records[name] = readTopic(ctx, t, b, name)
	}
	var dead int
	for _, p := range want.Records["jobs.w.dlq"] {
		dead += len(p)
	}
	if dead != 2 {
		t.Fatalf("%d dead letters, want 2", dead)
	}
	return want
}

// describeQueue is jobs/w's state of each partition, at now.
func describeQueue(t *testing.T, b *Backend, now int64) []queue.PartitionStats {
	t.Helper()
	info, err := b.DescribeQueueGroup("jobs", "w", now)
	if err != nil {
		t.Fatalf("describe jobs/w: %v", err)
	}
	var out []queue.PartitionStats
	for _, p := range info.Partitions {
		// Only what the state holds, not what a describe derives from
		// the time it is asked at.
		out = append(out, queue.PartitionStats{Partition: p.Partition, Start: p.Start, Next: p.Next, End: p.End, InFlight: p.InFlight,
			Acked: p.Acked, DeadLettered: p.DeadLettered, Nacked: p.Nacked})
	}
	return out
}

// readTopic reads every partition of topic through b, at each partition's
// leader.
func readTopic(ctx context.Context, t *testing.T, b *Backend, topic string) [][]string {
	t.Helper()
	tp, err := b.fsm.Topic(topic)
	if err != nil {
		t.Fatalf("topic %s: %v", topic, err)
	}
	out := make([][]string, len(tp.Partitions))
	for p := range out {
		out[p] = readPartition(ctx, t, b, topic, int32(p))
	}
	return out
}

// readPartition reads partition p of topic through b from its start, at
// its leader.
func readPartition(ctx context.Context, t *testing.T, b *Backend, topic string, p int32) []string {
	t.Helper()
	var vals []string
	for offset := int64(0); ; {
		r, err := b.ReadLeader(ctx, topic, p, offset, 1<<20)
		if err != nil {
			t.Fatalf("read %s-%d at %d: %v", topic, p, offset, err)
		}
		if len(r.Batches) == 0 {
			if offset < r.EndOffset {
				t.Fatalf("read %s-%d at %d: nothing, the end is %d", topic, p, offset, r.EndOffset)
			}
			return vals
		}
		bs, err := batch.DecodeAll(r.Batches)
		if err != nil {
			t.Fatal(err)
		}
		for _, bt := range bs {
			for _, rec := range bt.Records {
				if rec.Offset != offset {
					t.Fatalf("%s-%d: record at %d where %d was next", topic, p, rec.Offset, offset)
				}
				vals = append(vals, string(rec.Value))
				offset++
			}
		}
	}
}

// checkRestored checks that r, a node restored from a backup of want's
// workload, holds all of it, and takes new writes after it. ackLeases
// acks one leased delivery with its token (its lease must still run).
func checkRestored(ctx context.Context, t *testing.T, r *Node, want backupWant, ackLeases bool) {
	t.Helper()
	b := NewBackend(r)
	for _, name := range backupWorkloadTopics {
		if got := readTopic(ctx, t, b, name); fmt.Sprint(got) != fmt.Sprint(want.Records[name]) {
			t.Errorf("%s restored as %v, want %v", name, got, want.Records[name])
		}
	}
	// From the group's home: a data group, once groups are kept there
	// (docs/architecture.md, "Consumer groups").
	g, err := b.ConsumerGroup("billing")
	if err != nil {
		t.Fatalf("billing: %v", err)
	}
	for p, c := range want.Committed {
		if got := g.Topics["orders"].Partitions[int32(p)].Committed; got != c {
			t.Errorf("billing: orders-%d committed %d, want %d", p, got, c)
		}
	}
	if got := describeQueue(t, b, want.DescribedAt); !slices.Equal(got, want.Queue) {
		t.Errorf("jobs/w restored as %+v, want %+v", got, want.Queue)
	}
	// A retry of a record with an idempotency key is its duplicate.
	res, err := b.Produce(ctx, backend.ProduceRequest{Topic: "orders", Records: []backend.ProduceRecord{
		{Key: []byte("k0"), Value: []byte("order-000"), IdempotencyKey: "id-0"}}})
	if err != nil || !res.Results[0].Duplicate || res.Results[0].Partition != want.Idempotent.Partition || res.Results[0].Offset != want.Idempotent.Offset {
		t.Errorf("the retry of id-0 after the restore: %+v, %v; want a duplicate at %+v", res, err, want.Idempotent)
	}
	if ackLeases {
		tok := want.InFlight[0]
		ack, err := b.QueueAck(ctx, backend.QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{tok}})
		if err != nil || len(ack.Results) != 1 || ack.Results[0].Outcome != queue.TokenOK {
			t.Errorf("an ack of a delivery leased before the backup: %+v, %v", ack, err)
		}
	}
	// New records go after the restored ones, in every partition.
	for p, vals := range want.Records["orders"] {
		res, err := b.Produce(ctx, backend.ProduceRequest{Topic: "orders", Records: []backend.ProduceRecord{{Partition: int32(p), HasPartition: true, Value: []byte("new")}}})
		if err != nil || res.Results[0].Offset != int64(len(vals)) {
			t.Errorf("a produce to orders-%d after the restore: %+v, %v; want offset %d", p, res, err, len(vals))
		}
	}
}
