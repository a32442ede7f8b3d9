package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// TestCreatePartitionsScript grows a topic that a queue group and a
// consumer group work, and checks every refusal changes nothing: the new
// partitions start empty at offset 0, the queue group claims from them,
// the consumer group's member owns them after its next heartbeat, and a
// snapshot and a replay of the whole log give the same topic.
func TestCreatePartitionsScript(t *testing.T) {
	dir := t.TempDir()
	f, fatals := testFSM(t, dir)
	a := &applier{t: t, f: f}
	grow := func(now int64, c CreatePartitions) any {
		t.Helper()
		return a.apply(mustJSON(t, CmdCreatePartitions, now, c))
	}
	sec := int64(time.Second)
	a.apply(createCmd(t, "jobs", 2, qnow))
	a.apply(appendCmd(t, qnow, "jobs", 0, "a"))
	a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s"), FromEnd: true}))
	a.apply(appendCmd(t, qnow, "jobs", 1, "b"))
	joined, ok := a.apply(mustJSON(t, CmdGroupJoin, qnow, GroupJoin{Group: "billing", Member: "m1", Topics: []string{"jobs"}, SessionTimeoutMs: 10_000})).(group.Assignment)
	if !ok || len(joined.Partitions) != 2 {
		t.Fatalf("join: %+v", joined)
	}
	if got := a.claim(qnow+1, 10, time.Minute); len(got.Records) != 1 || got.Records[0].Partition != 1 {
		t.Fatalf("claim before growth: %+v", got.Records)
	}
	if f.AppliedLevel() >= PartitionsLevel {
		t.Fatalf("applied level %d before any growth", f.AppliedLevel())
	}

	grown, ok := grow(qnow+2*sec, CreatePartitions{Name: "jobs", Count: 4, TopicIndex: 1}).(*Topic)
	if !ok || len(grown.Partitions) != 4 {
		t.Fatalf("grow to 4: %v", grown)
	}
	if f.AppliedLevel() != PartitionsLevel {
		t.Fatalf("applied level %d after growth, want %d", f.AppliedLevel(), PartitionsLevel)
	}
	res, ok := a.apply(appendCmd(t, qnow+3*sec, "jobs", 3, "d")).(AppendResult)
	if !ok || res.BaseOffsets[0] != 0 {
		t.Fatalf("append to new partition 3: %v", res)
	}
	if got := a.claim(qnow+4*sec, 10, time.Minute); len(got.Records) != 1 || got.Records[0].Partition != 3 || got.Records[0].Offset != 0 {
		t.Fatalf("claim after growth: %+v", got.Records)
	}
	hb, ok := a.apply(mustJSON(t, CmdGroupHeartbeat, qnow+5*sec, GroupHeartbeat{Group: "billing", Member: "m1"})).(group.Assignment)
	if !ok || len(hb.Partitions) != 4 || hb.Generation <= joined.Generation {
		t.Fatalf("heartbeat after growth: %+v (joined at generation %d)", hb, joined.Generation)
	}

	refusals := []struct {
		name string
		c    CreatePartitions
		want error
	}{
		{"shrink", CreatePartitions{Name: "jobs", Count: 3}, backend.ErrPartitionCount},
		{"above the per-topic limit", CreatePartitions{Name: "jobs", Count: backend.MaxPartitions + 1}, backend.ErrPartitionCount},
		{"unknown topic", CreatePartitions{Name: "nope", Count: 2}, backend.ErrUnknownTopic},
		{"another incarnation", CreatePartitions{Name: "jobs", Count: 5, TopicIndex: 99}, backend.ErrUnknownTopic},
		// The cluster holds 6 partitions: jobs' 4 and its dead-letter
		// topic's 2.
		{"cluster quota", CreatePartitions{Name: "jobs", Count: 6, Quota: &TopicQuota{MaxPartitions: 7}}, backend.ErrQuotaExceeded},
	}
	for _, r := range refusals {
		err, _ := grow(qnow+6*sec, r.c).(error)
		if !errors.Is(err, r.want) {
			t.Errorf("%s: %v, want %v", r.name, err, r.want)
		}
		if tp, _ := f.Topic("jobs"); len(tp.Partitions) != 4 {
			t.Fatalf("%s: jobs has %d partitions after the refusal", r.name, len(tp.Partitions))
		}
	}
	var pce *backend.PartitionCountError
	if err, _ := grow(qnow+6*sec, CreatePartitions{Name: "jobs", Count: 1}).(error); !errors.As(err, &pce) || !errors.Is(err, backend.ErrInvalidArgument) || pce.Current != 4 {
		t.Fatalf("shrink to 1: %v", err)
	}
	if same, ok := grow(qnow+7*sec, CreatePartitions{Name: "jobs", Count: 4}).(*Topic); !ok || len(same.Partitions) != 4 {
		t.Fatalf("grow to the same count: %v", same)
	}
	// Within the quota: the partitions added are what counts.
	if tp, ok := grow(qnow+8*sec, CreatePartitions{Name: "jobs", Count: 5, Quota: &TopicQuota{MaxPartitions: 7}}).(*Topic); !ok || len(tp.Partitions) != 5 {
		t.Fatalf("grow to 5 within a quota of 7: %v", tp)
	}
	info, err := f.DescribeQueueGroup("jobs", "w", qnow+9*sec)
	if err != nil || len(info.Partitions) != 5 {
		t.Fatalf("queue group after growth: %d partitions, %v", len(info.Partitions), err)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
	want := describeGrown(t, f)

	// A snapshot restored over the same data.
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	s.Release()
	f.Close()
	restored, _ := testFSM(t, dir)
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if got := describeGrown(t, restored); got != want {
		t.Fatalf("after restore:\n%s\nwant\n%s", got, want)
	}
	restored.Close()

	// The whole log replayed, as after a restart without a snapshot: the
	// growth finds the new partitions' data and appends nothing twice.
	replayed, fatals := testFSM(t, dir)
	replayed.ApplyBatch(entries(a.log...))
	if got := describeGrown(t, replayed); got != want {
		t.Fatalf("after replay:\n%s\nwant\n%s", got, want)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}

// describeGrown is what TestCreatePartitionsScript compares: the topic's
// partitions with their records, its queue group's and consumer group's
// partitions.
func describeGrown(t *testing.T, f *FSM) string {
	t.Helper()
	tp, err := f.Topic("jobs")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for p := range tp.Partitions {
		fmt.Fprintf(&b, "jobs-%d %v\n", p, readAll(t, f, "jobs", int32(p)))
	}
	info, err := f.DescribeQueueGroup("jobs", "w", qnow+10*int64(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "queue partitions %d\n", len(info.Partitions))
	g, err := f.ConsumerGroup("billing")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "group generation %d, jobs partitions %d, m1 owns %v\n", g.Generation, len(g.Topics["jobs"].Partitions), g.Owned("m1"))
	return b.String()
}
