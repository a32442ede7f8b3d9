package replication

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// TestDataGroupsQueues: a queue group on a topic placed over data groups,
// with a replication factor of 2 over three nodes (so the meta leader
// holds no replica of one group, whose part goes over the Raft port).
// Every record is claimed once; acks, nacks (a dead letter written in its
// origin's group) and extends split by group and merge in order; a
// describe and the in-flight list merge every group's copy; a pause, a
// release, moved starts and a deletion reach every copy.
func TestDataGroupsQueues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 2 })
	l := nodes[0]
	waitGroupsOfTwo(ctx, t, nodes, describe)
	b := NewBackend(l)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "jobs", Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	var recs []backend.ProduceRecord
	for i := range 60 {
		recs = append(recs, backend.ProduceRecord{Partition: int32(i % 6), HasPartition: true, Value: fmt.Appendf(nil, "job-%02d", i)})
	}
	if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "jobs", Records: recs}); err != nil {
		t.Fatal(err)
	}
	cfg, err := b.CreateQueueGroup(ctx, backend.QueueCreate{Topic: "jobs", Group: "w", Config: queue.Config{MaxDeliveries: 3}})
	if err != nil {
		t.Fatalf("create a queue group on a placed topic: %v", err)
	}
	if cfg.DeadLetterTopic != "jobs.w.dlq" {
		t.Fatalf("config %+v", cfg)
	}
	mt, _ := l.FSM().Topic("jobs")
	dlq, err := l.FSM().Topic("jobs.w.dlq")
	if err != nil || fmt.Sprint(dlq.Placement) != fmt.Sprint(mt.Placement) {
		t.Fatalf("the dead-letter topic's placement %v (%v), want the topic's %v", dlq.Placement, err, mt.Placement)
	}
	if _, err := b.CreateQueueGroup(ctx, backend.QueueCreate{Topic: "jobs", Group: "w"}); !errors.Is(err, queue.ErrGroupExists) {
		t.Errorf("a second creation: %v, want ErrGroupExists", err)
	}

	// Every record claimed once, over calls of 7.
	seen := map[string]bool{}
	var claimed []backend.ClaimedRecord
	for range 30 {
		res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 7, Lease: time.Minute, Worker: "w1"}, 0, nil)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(res.Records) > 7 {
			t.Fatalf("a claim of 7 delivered %d", len(res.Records))
		}
		for _, r := range res.Records {
			if seen[string(r.Record.Value)] {
				t.Fatalf("%s delivered twice", r.Record.Value)
			}
			seen[string(r.Record.Value)] = true
			claimed = append(claimed, r)
		}
		if len(claimed) == 60 {
			break
		}
	}
	if len(claimed) != 60 {
		t.Fatalf("claimed %d of 60", len(claimed))
	}
	if res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 7, Lease: time.Minute}, 0, nil); err != nil || len(res.Records) != 0 {
		t.Fatalf("a claim with every record leased: %d records, %v", len(res.Records), err)
	}
	inFlight, more, err := b.QueueInFlight("jobs", "w", l.Now().UnixNano(), 0)
	if err != nil || len(inFlight) != 60 || more {
		t.Fatalf("in flight: %d (more %v), %v; want 60", len(inFlight), more, err)
	}

	// Acks for the first 40, in an order mixing groups; a permanent nack
	// for the next 5; an extend for the last 15, with a token of another
	// delivery among them (stale).
	var acks []queue.Token
	for _, r := range claimed[:40] {
		acks = append(acks, r.Token)
	}
	ack, err := b.QueueAck(ctx, backend.QueueAck{Topic: "jobs", Group: "w", Tokens: acks})
	if err != nil || len(ack.Results) != 40 {
		t.Fatalf("ack: %+v, %v", ack, err)
	}
	for i, r := range ack.Results {
		if r.Outcome != queue.TokenOK {
			t.Errorf("ack %d (%v): %+v", i, acks[i], r)
		}
	}
	var nacks []queue.Nack
	for _, r := range claimed[40:45] {
		nacks = append(nacks, queue.Nack{Token: r.Token, Permanent: true, Error: "poison"})
	}
	nack, err := b.QueueNack(ctx, backend.QueueNack{Topic: "jobs", Group: "w", Nacks: nacks})
	if err != nil || len(nack.Results) != 5 || nack.DeadLettered != 5 {
		t.Fatalf("nack: %+v, %v", nack, err)
	}
	ext := []queue.Token{}
	for _, r := range claimed[45:] {
		ext = append(ext, r.Token)
	}
	stale := claimed[45].Token
	stale.Delivery++
	ext = append(ext, stale)
	extended, err := b.QueueExtend(ctx, backend.QueueExtend{Topic: "jobs", Group: "w", Tokens: ext, Lease: 2 * time.Minute})
	if err != nil || len(extended.Results) != 16 {
		t.Fatalf("extend: %+v, %v", extended, err)
	}
	for i, r := range extended.Results[:15] {
		if r.Outcome != queue.TokenOK || r.LeaseUntil == 0 {
			t.Errorf("extend %d: %+v", i, r)
		}
	}
	if r := extended.Results[15]; r.Outcome != queue.TokenStale {
		t.Errorf("the stale token's extend: %+v, want stale", r)
	}
	// The dead letters are in their origin partition's group.
	for _, r := range claimed[40:45] {
		waitFor(ctx, t, fmt.Sprintf("the dead letter of %d@%d", r.Partition, r.Offset), func() bool {
			o, err := b.Offsets("jobs.w.dlq", r.Partition)
			return err == nil && o.End > 0
		}, describe)
	}

	// Described on every node: each partition from its group's copy. A
	// follower serves what it applied, so each node is waited for (a
	// client reading through it after writing through the leader would
	// carry the leader's index: read your writes).
	for _, n := range nodes {
		if err := NewBackend(n).AwaitApplied(ctx, l.FSM().AppliedIndex(), time.Minute); err != nil {
			t.Fatal(err)
		}
		var got string
		waitFor(ctx, t, n.NodeID()+" describes every group's copy", func() bool {
			info, err := NewBackend(n).DescribeQueueGroup("jobs", "w", n.Now().UnixNano())
			if err != nil || len(info.Partitions) != 6 {
				got = fmt.Sprintf("%+v, %v", info, err)
				return false
			}
			var acked, dead, flight int64
			for p, pi := range info.Partitions {
				if pi.Partition != int32(p) || pi.End != 10 {
					got = fmt.Sprintf("partition %d described as %+v", p, pi.PartitionStats)
					return false
				}
				acked += pi.Acked
				dead += pi.DeadLettered
				flight += pi.InFlight
			}
			got = fmt.Sprintf("acked %d, dead-lettered %d, in flight %d, backlog %d", acked, dead, flight, info.Backlog.Records)
			return acked == 40 && dead == 5 && flight == 15 && info.Backlog.Records == 15
		}, func() string {
			return got + "; want acked 40, dead-lettered 5, in flight 15, backlog 15; " + describe()
		})
	}

	// Paused: nothing delivered, in any group; released: the leases of
	// w1 end, and a resumed group delivers them again.
	if _, err := b.PauseQueueGroup(ctx, "jobs", "w", true); err != nil {
		t.Fatal(err)
	}
	rel, err := b.ReleaseQueueWorker(ctx, "jobs", "w", "w1", "test")
	if err != nil || rel.Released != 15 {
		t.Fatalf("release: %+v, %v; want 15 released", rel, err)
	}
	if res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 100, Lease: time.Minute}, 0, nil); err != nil || !res.Paused || len(res.Records) != 0 {
		t.Fatalf("claim while paused: %+v, %v", res, err)
	}
	if _, err := b.PauseQueueGroup(ctx, "jobs", "w", false); err != nil {
		t.Fatal(err)
	}
	res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 100, Lease: time.Minute, Worker: "w2"}, 5*time.Second, nil)
	if err != nil || len(res.Records) == 0 {
		t.Fatalf("claim after the release: %d records, %v", len(res.Records), err)
	}
	got := len(res.Records)
	for got < 15 {
		res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 100, Lease: time.Minute, Worker: "w2"}, time.Second, nil)
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("released records claimed %d of 15: %v", got, err)
		}
		got += len(res.Records)
	}

	// A long poll wakes for a record produced while it waits, in a group
	// the meta leader may hold no replica of.
	woke := make(chan backend.QueueClaimResult, 1)
	go func() {
		res, _ := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 1, Lease: time.Minute, Worker: "w2"}, 20*time.Second, nil)
		woke <- res
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := NewBackend(nodes[2]).Produce(ctx, backend.ProduceRequest{Topic: "jobs", Records: []backend.ProduceRecord{{Partition: 5, HasPartition: true, Value: []byte("late")}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-woke:
		if len(r.Records) != 1 || string(r.Records[0].Record.Value) != "late" {
			t.Fatalf("the long poll got %+v", r.Records)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not wake for a record produced while it waited")
	}

	// A redrive moves the five dead letters back to their origin
	// partitions: it reads the dead-letter topic across the groups and
	// commits its position there with each partition's end.
	job, err := b.StartRedrive(ctx, backend.RedriveSpec{DeadLetterTopic: "jobs.w.dlq"})
	if err != nil {
		t.Fatalf("a redrive of a placed dead-letter topic: %v", err)
	}
	waitFor(ctx, t, "the redrive ends", func() bool {
		j, err := b.RedriveJob(job.ID)
		return err == nil && j.Ended()
	}, describe)
	if j, _ := b.RedriveJob(job.ID); j.State != backend.RedriveDone || j.Progress.Redriven != 5 {
		t.Fatalf("redrive %+v, want done with 5 redriven", j)
	}
	for p, pos := range b.RedrivePosition(job) {
		if o, _ := b.Offsets("jobs.w.dlq", int32(p)); pos != o.End {
			t.Errorf("the redrive's position in dead-letter partition %d: %d, want its end %d", p, pos, o.End)
		}
	}
	redriven := 0
	for range 20 {
		res, err := b.QueueClaimWait(ctx, backend.QueueClaim{Topic: "jobs", Group: "w", Max: 100, Lease: time.Minute, Worker: "w2"}, time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		redriven += len(res.Records)
		if redriven >= 5 {
			break
		}
	}
	if redriven != 5 {
		t.Fatalf("claimed %d redriven records, want 5", redriven)
	}

	// Deletion is refused while records are in flight, then reaches
	// every copy.
	if err := b.DeleteQueueGroup(ctx, "jobs", "w"); !errors.Is(err, queue.ErrGroupBusy) {
		t.Fatalf("delete with records in flight: %v, want ErrGroupBusy", err)
	}
	if err := b.SetQueueStarts(ctx, "jobs", "w", []queue.PartitionStart{{Partition: 0, Offset: 10}}); !errors.Is(err, queue.ErrGroupBusy) {
		t.Fatalf("set starts with records in flight: %v, want ErrGroupBusy", err)
	}
	if rel, err := b.ReleaseQueueWorker(ctx, "jobs", "w", "w2", "test"); err != nil || rel.Released != 21 {
		t.Fatalf("release of w2: %+v, %v; want 21 released", rel, err)
	}
	if inFlight, _, err = b.QueueInFlight("jobs", "w", l.Now().UnixNano(), 0); err != nil || len(inFlight) != 0 {
		t.Fatalf("in flight after the releases: %d, %v", len(inFlight), err)
	}
	// Moved starts: partition 0's group skips its records.
	if err := b.SetQueueStarts(ctx, "jobs", "w", []queue.PartitionStart{{Partition: 0, Offset: 10}}); err != nil {
		t.Fatalf("set starts: %v", err)
	}
	info, err := b.DescribeQueueGroup("jobs", "w", l.Now().UnixNano())
	if err != nil || info.Partitions[0].Start != 10 || info.Partitions[0].Ready != 0 {
		t.Fatalf("partition 0 after its start moved to 10: %+v, %v", info.Partitions[0], err)
	}
	if err := b.DeleteQueueGroup(ctx, "jobs", "w"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, n := range nodes {
		waitFor(ctx, t, n.NodeID()+" drops every copy", func() bool {
			for _, f := range n.stateMachines() {
				if len(f.QueueGroups("jobs")) != 0 {
					return false
				}
			}
			return true
		}, describe)
	}
	if _, err := b.DescribeQueueGroup("jobs", "w", l.Now().UnixNano()); !errors.Is(err, queue.ErrGroupNotFound) {
		t.Fatalf("describe after the deletion: %v", err)
	}
}
