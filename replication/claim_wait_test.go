package replication

import (
	"context"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestNackWakesClaimWait: a claim waiting on a queue group whose one
// record another worker holds (for a minute) returns that record as soon
// as a nack without delay or a release offers it again, not at the end of
// its wait (an hour here; the test's context ends long before) or of the
// lease: a Kafka share consumer killed while it holds records would
// otherwise keep them from a waiting ShareFetch until its MaxWaitMillis
// ends.
func TestNackWakesClaimWait(t *testing.T) {
	for _, tc := range []struct {
		name  string
		offer func(ctx context.Context, b *Backend, held queue.Token) error
	}{
		{name: "nack", offer: func(ctx context.Context, b *Backend, held queue.Token) error {
			_, err := b.QueueNack(ctx, backend.QueueNack{Topic: "jobs", Group: "w", Nacks: []queue.Nack{{Token: held, HasDelay: true}}})
			return err
		}},
		{name: "release", offer: func(ctx context.Context, b *Backend, _ queue.Token) error {
			_, err := b.ReleaseQueueWorker(ctx, "jobs", "w", "first", "gone")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			n := openTestNode(t, ctx, t.TempDir())
			defer n.Close()
			b := NewBackend(n)
			if _, err := b.createTopic(ctx, fsm.CreateTopic{Name: "jobs", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.createQueueGroup(ctx, fsm.QueueCreate{Topic: "jobs", Group: "w"}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.appendCommand(ctx, fsm.Append{Topic: "jobs", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: jobBatch(t, "j")}}}); err != nil {
				t.Fatal(err)
			}
			first, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 10, Lease: time.Minute, Worker: "first"}, time.Second, nil)
			if err != nil || len(first.Records) != 1 {
				t.Fatalf("first claim: %+v, %v", first.Records, err)
			}
			type claimed struct {
				res backend.QueueClaimResult
				err error
			}
			done := make(chan claimed, 1)
			go func() {
				res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 10, Lease: time.Minute, Worker: "second"}, time.Hour, nil)
				done <- claimed{res, err}
			}()
			// Nothing shows that the claim waits already; where it does
			// not yet, it finds the record offered at once.
			if err := tc.offer(ctx, b, first.Records[0].Token); err != nil {
				t.Fatal(err)
			}
			select {
			case c := <-done:
				if c.err != nil || len(c.res.Records) != 1 || c.res.Records[0].Offset != first.Records[0].Offset {
					t.Fatalf("claim: %+v, %v", c.res.Records, c.err)
				}
			case <-ctx.Done():
				t.Fatalf("the claim still waits after the %s offered the record again", tc.name)
			}
		})
	}
}
