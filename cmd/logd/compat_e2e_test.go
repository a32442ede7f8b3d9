package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// The compatibility fixture is a single node's data dir written by the build
// of commit 2de3d3a with testdata/compat/make-fixture.sh: a snapshot plus
// Raft log entries after it, partition logs with several segments, a
// compacted topic, idempotency keys, consumer groups and a queue group with a
// dead-letter topic. The expectations below follow from the script's fixed
// inputs; none is read back from the server under test.

// fixtureRec is one record the fixture holds.
type fixtureRec struct {
	offset  int64
	key     string // "" for none
	value   string
	headers []string // "k=v", in order
}

func (r fixtureRec) String() string {
	return fmt.Sprintf("%d key=%q value=%q headers=%v", r.offset, r.key, r.value, r.headers)
}

// Where the old build's murmur2 partitioner put each key the script used.
var fixturePartitionOf = map[string]int32{
	"customer-0": 1, "customer-1": 0, "customer-2": 2, "customer-3": 1, "customer-4": 1,
	"acct-0": 0, "acct-1": 0, "acct-2": 1, "acct-3": 1, "acct-9": 0,
}

// fixtureRecords returns, per topic, every partition's records in order, as
// the script wrote them.
func fixtureRecords() map[string][][]fixtureRec {
	out := map[string][][]fixtureRec{}
	add := func(topic string, parts int, part int32, key, value string, headers ...string) {
		if out[topic] == nil {
			out[topic] = make([][]fixtureRec, parts)
		}
		recs := out[topic][part]
		out[topic][part] = append(recs, fixtureRec{offset: int64(len(recs)), key: key, value: value, headers: headers})
	}
	for round := range 2 {
		for c := range 5 {
			key := fmt.Sprintf("customer-%d", c)
			for j := range 3 {
				add("orders", 3, fixturePartitionOf[key], key, fmt.Sprintf("order-%d-%d", c, round*3+j), "source=fixture", fmt.Sprintf("customer=%d", c))
			}
		}
	}
	add("orders", 3, 1, "", "audit-no-key")
	for i := range 4 {
		key := fmt.Sprintf("acct-%d", i)
		add("payments", 2, fixturePartitionOf[key], key, fmt.Sprintf(`{"id":"pay-%d","amount":%d}`, i, 10*(i+1)))
	}
	for _, v := range []string{"imp-1", "imp-2", "imp-3"} {
		add("payments", 2, fixturePartitionOf["acct-9"], "acct-9", v)
	}
	for i := range 10 {
		add("jobs", 1, 0, "", fmt.Sprintf("j%d", i), fmt.Sprintf("job=j%d", i))
	}
	// state: k0..k3 written in rounds 0..3 at offsets 4r+k, 3 per segment;
	// compaction kept the newest of each key below the active segment (15).
	out["state"] = [][]fixtureRec{{
		{offset: 11, key: "k3", value: "k3=v2"},
		{offset: 12, key: "k0", value: "k0=v3"},
		{offset: 13, key: "k1", value: "k1=v3"},
		{offset: 14, key: "k2", value: "k2=v3"},
		{offset: 15, key: "k3", value: "k3=v3"},
	}}
	// The dead letters keep the record's headers and add their own; times
	// are checked apart.
	dlq := func(offset int64, job, reason, lastErr string, deliveries int) fixtureRec {
		return fixtureRec{offset: offset, value: job, headers: []string{
			"job=" + job,
			"logd-dlq-reason=" + reason, "logd-dlq-error=" + lastErr,
			"logd-dlq-origin-topic=jobs", "logd-dlq-origin-partition=0",
			fmt.Sprintf("logd-dlq-origin-offset=%s", job[1:]), "logd-dlq-group=w",
			fmt.Sprintf("logd-dlq-deliveries=%d", deliveries),
			"logd-dlq-first-delivery=TIME", "logd-dlq-last-delivery=TIME", "logd-dlq-time=TIME",
		}}
	}
	out["jobs.w.dlq"] = [][]fixtureRec{{dlq(0, "j4", "rejected", "bad amount", 1), dlq(1, "j5", "max_deliveries", "timeout 2", 2)}}
	return out
}

// fixtureConfig returns a topic's full configuration: the defaults of the
// old build with the settings the script gave.
func fixtureConfig(set ...string) map[string]string {
	cfg := map[string]string{
		"cleanup.policy":            "delete",
		"delete.retention.ms":       "86400000",
		"idempotency.max.keys":      "100000",
		"idempotency.window.ms":     "86400000",
		"max.message.bytes":         "1048588",
		"min.cleanable.dirty.ratio": "0.5",
		"min.compaction.lag.ms":     "0",
		"queue.max.backlog.bytes":   "-1",
		"queue.max.backlog.records": "-1",
		"retention.bytes":           "-1",
		"retention.ms":              "604800000",
		"segment.bytes":             "1073741824",
		"segment.ms":                "604800000",
	}
	for _, kv := range set {
		k, v, _ := strings.Cut(kv, "=")
		cfg[k] = v
	}
	return cfg
}

// untar unpacks a gzipped tarball of directories and regular files into dst.
func untar(t *testing.T, path, dst string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dst, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, dst+string(filepath.Separator)) {
			t.Fatalf("fixture entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(name, b, os.FileMode(h.Mode)&0o777)
			}
		default:
			err = fmt.Errorf("fixture entry %q: unexpected type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompatFixture starts this build on the data dir of commit 2de3d3a and
// checks that it serves the same topics, records, groups, queue state and
// idempotency keys. To write the fixture again, see the head of
// testdata/compat/make-fixture.sh. With logd's default
// --data-groups-per-node, the upgraded cluster, which holds topics and no
// data groups, keeps it so: a topic created now is in the meta group too,
// and no data group starts (docs/operations.md, "Data groups").
func TestCompatFixture(t *testing.T) {
	p := compatFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, p, "fresh", 4, nil)
	d, err := p.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "fresh"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, pi := range d.Msg.Partitions {
		if pi.DataGroup != 0 {
			t.Errorf("fresh-%d is in data group %d of the upgraded cluster, want the meta group", pi.Partition, pi.DataGroup)
		}
	}
	if st, err := clusterStatus(t, p); err != nil || len(st.DataGroups) != 0 {
		t.Errorf("the upgraded cluster runs data groups by default: %+v, %v", st.DataGroups, err)
	}
}

// TestCompatFixtureDataGroups starts this build with data groups on the
// same data dir: the fixture's topics stay in the meta group (its data
// group 0) and serve as before, groups and queue state included, while a
// topic created now is placed over the new data groups and served from
// them (docs/architecture.md, "Data groups").
func TestCompatFixtureDataGroups(t *testing.T) {
	p := compatFixture(t, "--data-groups-per-node", "2")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e2e.WaitFor(t, ctx, "two data groups led", func() bool {
		st, err := clusterStatus(t, p)
		if err != nil || len(st.DataGroups) != 2 {
			return false
		}
		return st.DataGroups[0].Leader == "n1" && st.DataGroups[1].Leader == "n1"
	})
	e2e.CreateTopic(t, ctx, p, "fresh", 4, nil)
	d, err := p.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "fresh"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, pi := range d.Msg.Partitions {
		if pi.DataGroup == 0 {
			t.Errorf("fresh-%d is in the meta group, want a data group", pi.Partition)
		}
	}
	if d, err := p.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "orders"})); err != nil || d.Msg.Partitions[0].DataGroup != 0 {
		t.Errorf("orders, the fixture's, moved out of the meta group: %v", err)
	}
	resp, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "fresh",
		Records: []*logdv1.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}, {Key: []byte("c"), Value: []byte("3")}}}))
	if err != nil {
		t.Fatal(err)
	}
	got := p.ReadAll(ctx, "fresh", 4)
	for i, r := range resp.Msg.Results {
		found := false
		for _, f := range got[r.Partition] {
			found = found || f.Offset == r.Offset && string(f.Value) == fmt.Sprint(i+1)
		}
		if !found {
			t.Errorf("record %d not read back at %d@%d", i, r.Partition, r.Offset)
		}
	}
}

// compatFixture runs TestCompatFixture's checks on a node started with
// extra flags, and returns it, running.
func compatFixture(t *testing.T, extra ...string) *e2e.Node {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	untar(t, filepath.Join("testdata", "compat", "fixture.tar.gz"), dir)
	b, err := os.ReadFile(filepath.Join(dir, "created-ms"))
	if err != nil {
		t.Fatal(err)
	}
	createdMs, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	created := time.UnixMilli(createdMs)

	// The cleaner stays out of the way: what it would do to old data is
	// retention's business, not compatibility's.
	p := e2e.NewNode(t, "n1", append([]string{"--cleaner-interval", "1h"}, extra...)...)
	p.DataDir = filepath.Join(dir, "data")
	p.Start()
	// A single node of an earlier build makes its cluster secret at its
	// first start on this one (docs/security.md, "Peers").
	if _, err := os.Stat(filepath.Join(p.DataDir, "cluster-secret")); err != nil {
		t.Errorf("the upgraded single node holds no cluster secret: %v", err)
	}

	want := fixtureRecords()
	topics, err := p.RPC.ListTopics(ctx, connect.NewRequest(&logdv1.ListTopicsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ti := range topics.Msg.Topics {
		names = append(names, ti.Name)
	}
	slices.Sort(names)
	if w := []string{"jobs", "jobs.w.dlq", "orders", "payments", "state"}; !slices.Equal(names, w) {
		t.Fatalf("topics %v, want %v", names, w)
	}
	wantConfig := map[string]map[string]string{
		"orders":     fixtureConfig("retention.ms=-1", "segment.bytes=1024", "max.message.bytes=65536"),
		"payments":   fixtureConfig("retention.ms=-1", "idempotency.window.ms=31536000000"),
		"state":      fixtureConfig("retention.ms=-1", "segment.bytes=256", "cleanup.policy=compact"),
		"jobs":       fixtureConfig("retention.ms=-1"),
		"jobs.w.dlq": fixtureConfig("max.message.bytes=1114124"), // room for the dead-letter headers
	}
	for _, name := range names {
		d, err := p.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: name}))
		if err != nil {
			t.Fatal(err)
		}
		parts := want[name]
		if n := d.Msg.Topic.Partitions; int(n) != len(parts) || len(d.Msg.Partitions) != len(parts) {
			t.Errorf("%s: %d partitions (%d described), want %d", name, n, len(d.Msg.Partitions), len(parts))
			continue
		}
		if got := d.Msg.Topic.Config; fmt.Sprint(got) != fmt.Sprint(wantConfig[name]) {
			t.Errorf("%s: config\n got %v\nwant %v", name, got, wantConfig[name])
		}
		all := p.ReadAll(ctx, name, int32(len(parts)))
		for part, recs := range parts {
			got := all[int32(part)]
			if end, wend := d.Msg.Partitions[part].EndOffset, recs[len(recs)-1].offset+1; end != wend {
				t.Errorf("%s-%d: end offset %d, want %d", name, part, end, wend)
			}
			for _, r := range got {
				if ts := time.UnixMilli(r.TimestampMs); ts.Sub(created).Abs() > 10*time.Minute {
					t.Errorf("%s-%d@%d: timestamp %v, the fixture was written at %v", name, part, r.Offset, ts, created)
				}
			}
			if g, w := renderFixture(got, created), renderWant(recs); g != w {
				t.Errorf("%s-%d records:\n got %s\nwant %s", name, part, g, w)
			}
		}
	}
	if d, err := p.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "state"})); err == nil && d.Msg.Partitions[0].CompactedSegments != 5 {
		t.Errorf("state: %d compacted segments, want the fixture's 5", d.Msg.Partitions[0].CompactedSegments)
	}

	checkFixtureGroups(t, ctx, p)
	checkFixtureQueue(t, ctx, p, created)

	t.Run("idempotency", func(t *testing.T) {
		// The keys were stamped to expire a year after created.
		if time.Since(created) > 364*24*time.Hour {
			t.Skipf("the fixture (written %v) is older than its idempotency window; regenerate it with testdata/compat/make-fixture.sh", created)
		}
		for _, tc := range []struct {
			key, recKey, value string
			part               int32
			offset             int64
		}{
			{key: "pay-2", recKey: "acct-2", value: `{"id":"pay-2","amount":30}`, part: 1, offset: 0},
			{key: "import-1-2", recKey: "acct-9", value: "imp-2", part: 0, offset: 3},
		} {
			resp, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "payments",
				Records: []*logdv1.Record{{Key: []byte(tc.recKey), Value: []byte(tc.value), IdempotencyKey: tc.key}}}))
			if err != nil {
				t.Fatalf("%s: %v", tc.key, err)
			}
			if r := resp.Msg.Results[0]; !r.Duplicate || r.Partition != tc.part || r.Offset != tc.offset {
				t.Errorf("%s: re-produced at %d/%d duplicate=%v, want the original %d/%d", tc.key, r.Partition, r.Offset, r.Duplicate, tc.part, tc.offset)
			}
		}
		_, err := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "payments",
			Records: []*logdv1.Record{{Key: []byte("acct-0"), Value: []byte("another payload"), IdempotencyKey: "pay-0"}}}))
		var ce *connect.Error
		if !errors.As(err, &ce) || e2e.ReasonOf(ce) != logdv1.Reason_REASON_IDEMPOTENCY_CONFLICT {
			t.Errorf("pay-0 with another payload: %v, want an idempotency conflict", err)
		}
		d, err := p.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "payments"}))
		if err != nil {
			t.Fatal(err)
		}
		if e0, e1 := d.Msg.Partitions[0].EndOffset, d.Msg.Partitions[1].EndOffset; e0 != 5 || e1 != 2 {
			t.Errorf("payments end offsets %d, %d after duplicates, want 5, 2", e0, e1)
		}
	})
	return p
}

// renderFixture prints fetched records like renderWant; header values that
// are times must parse and fall near created, and print as TIME.
func renderFixture(recs []*logdv1.FetchedRecord, created time.Time) string {
	var b strings.Builder
	for _, r := range recs {
		var hs []string
		for _, h := range r.Headers {
			v := string(h.Value)
			if strings.HasSuffix(h.Key, "-delivery") || h.Key == "logd-dlq-time" {
				if ts, err := time.Parse(time.RFC3339Nano, v); err == nil && ts.Sub(created).Abs() < 10*time.Minute {
					v = "TIME"
				}
			}
			hs = append(hs, h.Key+"="+v)
		}
		fmt.Fprintf(&b, "\n  %v", fixtureRec{offset: r.Offset, key: string(r.Key), value: string(r.Value), headers: hs})
	}
	return b.String()
}

func renderWant(recs []fixtureRec) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "\n  %v", r)
	}
	return b.String()
}

// checkFixtureGroups: billing's offsets were reset to 2 on each partition of
// orders; analytics read 3 records of jobs as a member and committed.
func checkFixtureGroups(t *testing.T, ctx context.Context, p *e2e.Node) {
	t.Helper()
	for _, tc := range []struct {
		group                          string
		generation, rebalances, resets int64
		committed                      []string // topic/partition=offset
	}{
		{group: "billing", generation: 1, rebalances: 0, resets: 1, committed: []string{"orders/0=2", "orders/1=2", "orders/2=2"}},
		{group: "analytics", generation: 2, rebalances: 2, resets: 0, committed: []string{"jobs/0=3"}},
	} {
		d, err := p.RPC.DescribeGroup(ctx, connect.NewRequest(&logdv1.DescribeGroupRequest{Group: tc.group}))
		if err != nil {
			t.Errorf("%s: %v", tc.group, err)
			continue
		}
		var committed []string
		for _, gp := range d.Msg.Partitions {
			committed = append(committed, fmt.Sprintf("%s/%d=%d", gp.Topic, gp.Partition, gp.CommittedOffset))
		}
		slices.Sort(committed)
		if !slices.Equal(committed, tc.committed) {
			t.Errorf("%s: committed %v, want %v", tc.group, committed, tc.committed)
		}
		if d.Msg.State != "empty" || len(d.Msg.Members) != 0 || d.Msg.Generation != tc.generation ||
			d.Msg.Rebalances != tc.rebalances || d.Msg.OffsetResets != tc.resets {
			t.Errorf("%s: state %q, %d members, generation %d, %d rebalances, %d resets; want empty, 0, %d, %d, %d",
				tc.group, d.Msg.State, len(d.Msg.Members), d.Msg.Generation, d.Msg.Rebalances, d.Msg.OffsetResets,
				tc.generation, tc.rebalances, tc.resets)
		}
	}
}

// checkFixtureQueue: queue group w on jobs (max deliveries 2, no deadline
// header) acked j0 j1, leased j2 for 12 h, delayed j3 for a week,
// dead-lettered j4 (rejected) and j5 (second failed delivery), and never
// delivered j6..j9. The lease and the delay run out with time, so what is
// in flight or delayed depends on the fixture's age: created is after the
// lease and the delay were set, and at most a minute after.
func checkFixtureQueue(t *testing.T, ctx context.Context, p *e2e.Node, created time.Time) {
	t.Helper()
	d, err := p.RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: "jobs", Group: "w"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := d.Msg.Config
	if cfg.GetLeaseMs() != 30000 || cfg.GetMaxDeliveries() != 2 || cfg.GetDeadLetterTopic() != "jobs.w.dlq" || cfg.GetDeadlineHeader() != "-" ||
		cfg.GetBackoffBaseMs() != 1000 || cfg.GetBackoffMaxMs() != 300000 || cfg.GetMaxInFlight() != 1000 || cfg.GetAgeLimitMs() != 0 {
		t.Errorf("config %v", cfg)
	}
	if d.Msg.Paused || d.Msg.DeadLetterRecords != 2 {
		t.Errorf("paused %v, %d dead-letter records; want running, 2", d.Msg.Paused, d.Msg.DeadLetterRecords)
	}
	if len(d.Msg.Partitions) != 1 {
		t.Fatalf("%d partitions, want 1", len(d.Msg.Partitions))
	}
	s := d.Msg.Partitions[0]
	got := fmt.Sprintf("done %d next %d end %d acked %d dead-lettered %d dead-pending %d nacked %d expired %d",
		s.DoneOffset, s.NextOffset, s.EndOffset, s.Acked, s.DeadLettered, s.DeadPending, s.Nacked, s.Expired)
	if want := "done 2 next 6 end 10 acked 2 dead-lettered 2 dead-pending 0 nacked 4 expired 0"; got != want {
		t.Errorf("jobs-0:\n got %s\nwant %s", got, want)
	}
	// ready counts j6..j9, plus j2 once its lease ran out, plus j3 once its
	// delay did; in the minute before either moment both answers are right.
	age := time.Since(created)
	live := func(d time.Duration, got int64) int64 {
		switch {
		case age < d-time.Minute:
			return 1
		case age >= d:
			return 0
		}
		return min(max(got, 0), 1)
	}
	inFlight := live(12*time.Hour, s.InFlight)
	delayed := live(7*24*time.Hour, s.Delayed)
	ready := 4 + (1 - inFlight) + (1 - delayed)
	if s.Ready != ready || s.InFlight != inFlight || s.Delayed != delayed {
		t.Errorf("jobs-0 at fixture age %v: ready %d in flight %d delayed %d, want %d %d %d",
			age.Round(time.Second), s.Ready, s.InFlight, s.Delayed, ready, inFlight, delayed)
	}
}
