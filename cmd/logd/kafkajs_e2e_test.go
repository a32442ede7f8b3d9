package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/partition"
)

// kafkajsDir holds the kafkajs scripts, package.json and the
// package-lock.json that pins kafkajs; scripts/test-tools.sh runs npm ci
// there.
const kafkajsDir = "testdata/kafkajs"

// kafkajsNode returns the path of node after checking that the kafkajs
// the lock file pins is installed (scripts/test-tools.sh installs node,
// npm and it; make test runs that first). Without them the test skips,
// except under CI=true, where a missing tool is a broken setup and fails.
func kafkajsNode(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: scripts/test-tools.sh installs it (make test runs it)", what)
		}
		t.Skipf("%s: run scripts/test-tools.sh (make test does) to run this test", what)
	}
	bin, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	b, err := os.ReadFile(filepath.Join(kafkajsDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatalf("%s/package-lock.json: %v", kafkajsDir, err)
	}
	want := lock.Packages["node_modules/kafkajs"].Version
	var installed struct {
		Version string `json:"version"`
	}
	b, err = os.ReadFile(filepath.Join(kafkajsDir, "node_modules", "kafkajs", "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &installed)
	}
	if err != nil || installed.Version != want {
		missing(fmt.Sprintf("kafkajs %s is not installed in %s (found %q, %v)", want, kafkajsDir, installed.Version, err))
	}
	return bin
}

// runKafkajs runs one command of testdata/kafkajs/kafkajs.js with args as
// its JSON parameters and decodes the JSON it prints into out.
func runKafkajs(t *testing.T, ctx context.Context, bin, command string, args map[string]any, out any) {
	t.Helper()
	start := time.Now()
	if err := execKafkajs(ctx, bin, command, args, out); err != nil {
		t.Fatal(err)
	}
	t.Logf("kafkajs %s: %v (under shared load)", command, time.Since(start).Round(time.Millisecond))
}

// execKafkajs is runKafkajs for any goroutine: it returns what went wrong.
func execKafkajs(ctx context.Context, bin, command string, args map[string]any, out any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "kafkajs.js", command, string(raw))
	cmd.Dir = kafkajsDir
	cmd.Env = append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kafkajs %s: %v\n%s", command, err, e2e.Tail(stderr.String(), 4000))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("kafkajs %s printed %q: %v\n%s", command, e2e.Tail(stdout.String(), 2000), err, e2e.Tail(stderr.String(), 4000))
	}
	return nil
}

// kafkajsError is an error kafkajs.js reports, with its causes.
type kafkajsError struct {
	Name    string          `json:"name"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Cause   *kafkajsError   `json:"cause"`
	Errors  []*kafkajsError `json:"errors"`
}

// types lists the Kafka error types of e and of its causes.
func (e *kafkajsError) types() []string {
	if e == nil {
		return nil
	}
	out := []string{}
	if e.Type != "" {
		out = append(out, e.Type)
	}
	out = append(out, e.Cause.types()...)
	for _, c := range e.Errors {
		out = append(out, c.types()...)
	}
	return out
}

// kafkajsRecord is record i of kafkajs.js's produce command.
func kafkajsRecord(i int) client.FetchedRecord {
	return client.FetchedRecord{
		Key:     fmt.Appendf(nil, "key-%d", i%97),
		Value:   fmt.Appendf(nil, "kafkajs-%05d", i),
		Headers: []client.Header{{Key: "seq", Value: []byte(strconv.Itoa(i))}, {Key: "origin", Value: []byte("kafkajs")}},
	}
}

// readByValue reads every record of topic through logd's Go client and
// indexes them by value; a value read twice fails the test.
func readByValue(t *testing.T, ctx context.Context, nd *e2e.Node, topic string) map[string]client.FetchedRecord {
	t.Helper()
	c, err := client.New(nd.Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]client.FetchedRecord{}
	for _, p := range d.Partitions {
		for off := p.LogStart; off < p.End; {
			resp, err := c.Fetch(ctx, client.FetchRequest{Topic: topic, Partition: p.Partition, Offset: off})
			if err != nil {
				t.Fatalf("fetch %s/%d@%d: %v", topic, p.Partition, off, err)
			}
			for _, r := range resp.Records {
				if prev, dup := out[string(r.Value)]; dup {
					t.Fatalf("%q read at %d/%d and at %d/%d", r.Value, prev.Partition, prev.Offset, r.Partition, r.Offset)
				}
				out[string(r.Value)] = r
			}
			if resp.Next <= off {
				t.Fatalf("fetch %s/%d@%d: next offset %d", topic, p.Partition, off, resp.Next)
			}
			off = resp.Next
		}
	}
	return out
}

// sameHeaders reports whether two header lists are equal, in order.
func sameHeaders(a, b []client.Header) bool {
	return slices.EqualFunc(a, b, func(x, y client.Header) bool { return x.Key == y.Key && bytes.Equal(x.Value, y.Value) })
}

// TestKafkaKafkajs runs kafkajs 2.2.4 (pinned by
// testdata/kafkajs/package-lock.json) against the built logd, with topic
// auto-creation off:
//   - its producer (acks -1, every other send gzip) writes 300 keyed
//     records with headers across three partitions; logd's Go client reads
//     every one back once, with its key and headers, in the partition of
//     Kafka's murmur2 (kafkajs's default partitioner, and logd's), at the
//     offsets the produce answers gave; its admin client lists each
//     partition's offsets, earliest, latest and by timestamp;
//   - its producer with kafkajs's defaults, which ask Metadata to create a
//     missing topic, is refused with UNKNOWN_TOPIC_OR_PARTITION and creates
//     nothing;
//   - its admin client creates a topic with a setting, sees it in
//     Metadata and DescribeConfigs, replaces its settings with
//     alterConfigs (AlterConfigs: the setting given is set, the one not
//     given goes back to its default), is told it exists when it creates
//     it again, and deletes it; logd's client sees each step. alterConfigs
//     of the deleted topic is UNKNOWN_TOPIC_OR_PARTITION.
func TestKafkaKafkajs(t *testing.T) {
	bin := kafkajsNode(t)
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, "--kafka-listen", kaddr, "--kafka-auto-create-topics=false")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(nd.Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topics := func() []string {
		t.Helper()
		ts, err := c.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tp := range ts {
			names = append(names, tp.Name)
		}
		return names
	}

	t.Run("produce", func(t *testing.T) {
		const parts, n, perSend = 3, 300, 30
		e2e.CreateTopic(t, ctx, nd, "js", parts, nil)
		var res struct {
			Sends []struct {
				First int `json:"first"`
				Count int `json:"count"`
				Meta  []struct {
					Partition  int32  `json:"partition"`
					ErrorCode  int    `json:"errorCode"`
					BaseOffset string `json:"baseOffset"`
				} `json:"meta"`
			} `json:"sends"`
		}
		runKafkajs(t, ctx, bin, "produce", map[string]any{"broker": kaddr, "topic": "js", "count": n, "perSend": perSend}, &res)

		got := readByValue(t, ctx, nd, "js")
		if len(got) != n {
			t.Fatalf("logd's client read %d records, kafkajs produced %d", len(got), n)
		}
		perPart := map[int32]int{}
		for i := range n {
			want := kafkajsRecord(i)
			r, ok := got[string(want.Value)]
			if !ok {
				t.Fatalf("%s: produced by kafkajs, not read by logd's client", want.Value)
			}
			if !bytes.Equal(r.Key, want.Key) || !sameHeaders(r.Headers, want.Headers) {
				t.Fatalf("%s: key %q headers %v, want key %q headers %v", want.Value, r.Key, r.Headers, want.Key, want.Headers)
			}
			if p := partition.ForKey(want.Key, parts); r.Partition != p {
				t.Fatalf("%s (key %s) is in partition %d, murmur2 gives %d", want.Value, want.Key, r.Partition, p)
			}
			perPart[r.Partition]++
		}
		if len(perPart) != parts {
			t.Fatalf("records landed in %d partitions of %d: %v", len(perPart), parts, perPart)
		}
		// ListOffsets through kafkajs's admin client: the log start and end
		// of each partition, and by the time of the middle record, the first
		// offset stamped at or after it (kafkajs gives the end where none is).
		ends := map[int32]int64{}
		mid := got[string(kafkajsRecord(n/2).Value)].Timestamp
		atMid := map[int32]int64{}
		for _, r := range got {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
			if !r.Timestamp.Before(mid) {
				if o, ok := atMid[r.Partition]; !ok || r.Offset < o {
					atMid[r.Partition] = r.Offset
				}
			}
		}
		var offs struct {
			Offsets []struct {
				Partition int32  `json:"partition"`
				Low       string `json:"low"`
				High      string `json:"high"`
			} `json:"offsets"`
			ByTimestamp []struct {
				Partition int32  `json:"partition"`
				Offset    string `json:"offset"`
			} `json:"byTimestamp"`
		}
		runKafkajs(t, ctx, bin, "offsets", map[string]any{"broker": kaddr, "topic": "js", "timestamp": mid.UnixMilli()}, &offs)
		if len(offs.Offsets) != parts || len(offs.ByTimestamp) != parts {
			t.Fatalf("kafkajs offsets of %d and %d partitions, want %d", len(offs.Offsets), len(offs.ByTimestamp), parts)
		}
		for _, o := range offs.Offsets {
			if o.Low != "0" || o.High != strconv.FormatInt(ends[o.Partition], 10) {
				t.Fatalf("kafkajs fetchTopicOffsets: partition %d from %s to %s, want 0 to %d", o.Partition, o.Low, o.High, ends[o.Partition])
			}
		}
		for _, o := range offs.ByTimestamp {
			want, ok := atMid[o.Partition]
			if !ok {
				want = ends[o.Partition]
			}
			if o.Offset != strconv.FormatInt(want, 10) {
				t.Fatalf("kafkajs fetchTopicOffsetsByTimestamp(%d): partition %d at %s, want %d", mid.UnixMilli(), o.Partition, o.Offset, want)
			}
		}

		// Each send's records of a partition sit from the base offset its
		// answer gave, in the order sent.
		if len(res.Sends) != n/perSend {
			t.Fatalf("kafkajs reported %d sends, want %d", len(res.Sends), n/perSend)
		}
		for _, s := range res.Sends {
			next := map[int32]int64{}
			for _, m := range s.Meta {
				if m.ErrorCode != 0 {
					t.Fatalf("send of records %d..: partition %d answered error %d", s.First, m.Partition, m.ErrorCode)
				}
				base, err := strconv.ParseInt(m.BaseOffset, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				next[m.Partition] = base
			}
			for i := s.First; i < s.First+s.Count; i++ {
				r := got[string(kafkajsRecord(i).Value)]
				want, ok := next[r.Partition]
				if !ok {
					t.Fatalf("record %d is in partition %d, which its send's answer does not name", i, r.Partition)
				}
				if r.Offset != want {
					t.Fatalf("record %d is at %d/%d, its send's answer puts it at %d", i, r.Partition, r.Offset, want)
				}
				next[r.Partition]++
			}
		}
	})

	t.Run("auto-create refused", func(t *testing.T) {
		var res struct {
			Produced bool          `json:"produced"`
			Error    *kafkajsError `json:"error"`
		}
		runKafkajs(t, ctx, bin, "produce-missing", map[string]any{"broker": kaddr, "topic": "js-missing", "retries": 2}, &res)
		if res.Produced || !slices.Contains(res.Error.types(), "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Fatalf("kafkajs produce to a missing topic: produced %v, error %+v; want UNKNOWN_TOPIC_OR_PARTITION", res.Produced, res.Error)
		}
		if slices.Contains(topics(), "js-missing") {
			t.Fatal("a kafkajs produce created js-missing with auto-creation off")
		}
	})

	t.Run("admin", func(t *testing.T) {
		var created struct {
			Created    bool `json:"created"`
			Listed     bool `json:"listed"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
				Error     int   `json:"error"`
			} `json:"partitions"`
			RetentionMs    *string           `json:"retentionMs"`
			Altered        map[string]string `json:"altered"`
			CreatedAgain   bool              `json:"createdAgain"`
			CreatedDefault bool              `json:"createdDefault"`
		}
		runKafkajs(t, ctx, bin, "admin-create", map[string]any{"broker": kaddr, "topic": "jsadmin", "partitions": 4}, &created)
		if !created.Created || !created.Listed || len(created.Partitions) != 4 || !created.CreatedDefault {
			t.Fatalf("kafkajs admin: %+v; want created, listed, 4 partitions, and the default topic created", created)
		}
		for _, p := range created.Partitions {
			if p.Leader != 1 || p.Error != 0 {
				t.Fatalf("kafkajs metadata of jsadmin: %+v; want leader 1 (n1) and no error", created.Partitions)
			}
		}
		if created.RetentionMs == nil || *created.RetentionMs != "3600000" {
			t.Fatalf("kafkajs DescribeConfigs of jsadmin: retention.ms %v, want 3600000", created.RetentionMs)
		}
		if want := map[string]string{"cleanup.policy": "compact", "retention.ms": "604800000"}; !maps.Equal(created.Altered, want) {
			t.Fatalf("kafkajs alterConfigs of jsadmin: %v after, want %v", created.Altered, want)
		}
		if created.CreatedAgain {
			t.Fatal("kafkajs created jsadmin twice: want TOPIC_ALREADY_EXISTS (createTopics answers false)")
		}
		for name, want := range map[string]int32{"jsadmin": 4, "jsadmin-default": 1} {
			d, err := c.DescribeTopic(ctx, name)
			if err != nil {
				t.Fatalf("logd's client after kafkajs createTopics: %v", err)
			}
			if d.Topic.Partitions != want {
				t.Fatalf("%s has %d partitions, want %d", name, d.Topic.Partitions, want)
			}
			if name == "jsadmin" && d.Topic.Config["cleanup.policy"] != "compact" {
				t.Fatalf("jsadmin's cleanup.policy is %q in logd, kafkajs set compact", d.Topic.Config["cleanup.policy"])
			}
		}

		var deleted struct {
			Left         []string      `json:"left"`
			AlterConfigs *kafkajsError `json:"alterConfigs"`
		}
		runKafkajs(t, ctx, bin, "admin-delete", map[string]any{"broker": kaddr, "topic": "jsadmin"}, &deleted)
		if len(deleted.Left) != 0 {
			t.Fatalf("kafkajs lists %v after deleting them", deleted.Left)
		}
		for _, name := range topics() {
			if strings.HasPrefix(name, "jsadmin") {
				t.Fatalf("logd still has %s after kafkajs deleteTopics", name)
			}
		}
		if deleted.AlterConfigs == nil || !slices.Contains(deleted.AlterConfigs.types(), "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Fatalf("kafkajs alterConfigs of a deleted topic: %+v; want UNKNOWN_TOPIC_OR_PARTITION", deleted.AlterConfigs)
		}
	})
}

// kafkajsGroup is what kafkajs.js's group command reports: whether the
// members got their assignments and consumed what was expected, and each
// member's joins and records.
type kafkajsGroup struct {
	Assigned bool `json:"assigned"`
	Complete bool `json:"complete"`
	Members  []struct {
		Joins []struct {
			MemberID   string  `json:"memberId"`
			Leader     bool    `json:"leader"`
			Partitions []int32 `json:"partitions"`
		} `json:"joins"`
		Records []struct {
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Value     string `json:"value"`
		} `json:"records"`
	} `json:"members"`
}

// describeGroup is `logctl group describe group -o json`.
func describeGroup(t *testing.T, nd *e2e.Node, group string) client.GroupDescription {
	t.Helper()
	var d client.GroupDescription
	if err := json.Unmarshal([]byte(e2e.Logctl(t, nd, "group", "describe", group, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// waitCommittedAtEnd waits until `logctl group describe` shows group's
// commits at the end of every one of parts partitions.
func waitCommittedAtEnd(t *testing.T, ctx context.Context, nd *e2e.Node, group string, parts int) client.GroupDescription {
	t.Helper()
	var d client.GroupDescription
	e2e.WaitFor(t, ctx, "logctl group describe "+group+": commits at the end of every partition", func() bool {
		d = describeGroup(t, nd, group)
		done := len(d.Partitions) == parts
		for _, p := range d.Partitions {
			done = done && p.Committed == p.End && p.LagRecords == 0
		}
		return done
	})
	return d
}

// TestKafkaKafkajsGroup runs two kafkajs consumers (round-robin assignor,
// eager) in one group on a topic of four partitions that holds 200
// records written by logd's client: once both hold partitions, disjoint
// and covering the topic, a kafkajs producer writes 200 more. Between
// them the two consume every record exactly once, each only from its own
// partitions, at the partition and offset logd's client reads it; once
// they left, `logctl group describe` shows their commits at the end of
// every partition.
func TestKafkaKafkajsGroup(t *testing.T) {
	bin := kafkajsNode(t)
	const parts, early, late = 4, 200, 200
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, kafkaGroupArgs(kaddr)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "jsgroup", parts, nil)
	c, err := client.New(nd.Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var recs []client.Record
	for i := range early {
		recs = append(recs, client.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "early-%05d", i)})
	}
	if _, err := c.Produce(ctx, "jsgroup", recs); err != nil {
		t.Fatal(err)
	}

	var res kafkajsGroup
	runKafkajs(t, ctx, bin, "group", map[string]any{"broker": kaddr, "topic": "jsgroup", "partitions": parts, "group": "jsg",
		"members": 2, "produce": late, "prefix": "late", "expect": early + late, "settleMs": 500, "timeoutMs": 60_000}, &res)
	if !res.Assigned || !res.Complete || len(res.Members) != 2 {
		t.Fatalf("kafkajs group: assigned %v, complete %v, %d members", res.Assigned, res.Complete, len(res.Members))
	}

	stored := readByValue(t, ctx, nd, "jsgroup")
	if len(stored) != early+late {
		t.Fatalf("logd's client read %d records, want %d", len(stored), early+late)
	}
	owner := map[int32]int{}
	times := map[string]int{}
	for m, mem := range res.Members {
		// One join each: both joined the group's first generation, and no
		// rebalance followed (one would allow records read twice).
		if len(mem.Joins) != 1 {
			t.Fatalf("kafkajs member %d joined %d times: %+v", m, len(mem.Joins), mem.Joins)
		}
		for _, p := range mem.Joins[0].Partitions {
			if prev, dup := owner[p]; dup {
				t.Fatalf("partition %d assigned to members %d and %d", p, prev, m)
			}
			owner[p] = m
		}
	}
	for m, mem := range res.Members {
		if len(mem.Records) == 0 {
			t.Fatalf("kafkajs member %d (partitions %v) consumed nothing", m, mem.Joins[0].Partitions)
		}
		for _, r := range mem.Records {
			times[r.Value]++
			s, ok := stored[r.Value]
			if !ok {
				t.Fatalf("kafkajs consumed %q, which logd does not hold", r.Value)
			}
			if s.Partition != r.Partition || s.Offset != r.Offset {
				t.Fatalf("kafkajs consumed %q at %d/%d, logd holds it at %d/%d", r.Value, r.Partition, r.Offset, s.Partition, s.Offset)
			}
			if owner[r.Partition] != m {
				t.Fatalf("kafkajs member %d consumed %q of partition %d, assigned to member %d", m, r.Value, r.Partition, owner[r.Partition])
			}
		}
	}
	if len(owner) != parts {
		t.Fatalf("the members hold %d partitions of %d", len(owner), parts)
	}
	for v := range stored {
		if times[v] != 1 {
			t.Fatalf("%s consumed %d times by the group, want once", v, times[v])
		}
	}
	waitCommittedAtEnd(t, ctx, nd, "jsg", parts)
}

// TestKafkaMixedGroup hands one group from client to client: kcat
// produces 300 keyed records; `logctl consume --group` (logd's own group
// protocol) consumes them all, commits and leaves; `logctl group
// reset-offsets --to-offset 40` moves the group back; a kafkajs consumer
// joining the same group then reads every partition from offset 40 to its
// end, the same records logctl read there, and commits the end again.
func TestKafkaMixedGroup(t *testing.T) {
	kc := kcat(t)
	bin := kafkajsNode(t)
	const parts, n, reset = 3, 300, 40
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, kafkaGroupArgs(kaddr)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "mixed", parts, nil)

	file := filepath.Join(t.TempDir(), "records.txt")
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "k%d:mixed-%05d\n", i%37, i)
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runKcat(t, ctx, kc, "-b", kaddr, "-P", "-t", "mixed", "-K:", "-l", file)

	// logctl's group consumer: every record once, by partition and offset.
	type pos struct {
		partition int32
		offset    int64
	}
	at := map[pos]string{}
	seen := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(e2e.Logctl(t, nd, "consume", "mixed", "--group", "mx", "-o", "json")), "\n") {
		var r struct {
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Key       string `json:"key"`
			Value     string `json:"value"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("logctl consume printed %q: %v", line, err)
		}
		if seen[r.Value] {
			t.Fatalf("logctl consume --group read %q twice", r.Value)
		}
		seen[r.Value] = true
		at[pos{r.Partition, r.Offset}] = r.Value
	}
	if len(seen) != n {
		t.Fatalf("logctl consume --group read %d records, kcat produced %d", len(seen), n)
	}
	d := waitCommittedAtEnd(t, ctx, nd, "mx", parts)

	e2e.Logctl(t, nd, "group", "reset-offsets", "mx", "--topic", "mixed", "--to-offset", strconv.Itoa(reset), "--execute")
	want := 0
	for _, p := range d.Partitions {
		want += int(p.End - reset)
	}
	var res kafkajsGroup
	runKafkajs(t, ctx, bin, "group", map[string]any{"broker": kaddr, "topic": "mixed", "partitions": parts, "group": "mx",
		"members": 1, "produce": 0, "expect": want, "settleMs": 500, "timeoutMs": 60_000}, &res)
	if !res.Assigned || !res.Complete || len(res.Members) != 1 {
		t.Fatalf("kafkajs in group mx after the reset: assigned %v, complete %v, %d members", res.Assigned, res.Complete, len(res.Members))
	}
	next := map[int32]int64{}
	for _, p := range d.Partitions {
		next[p.Partition] = reset
	}
	for _, r := range res.Members[0].Records {
		if r.Offset != next[r.Partition] {
			t.Fatalf("after the reset to %d, kafkajs read %d/%d, want offset %d", reset, r.Partition, r.Offset, next[r.Partition])
		}
		if v := at[pos{r.Partition, r.Offset}]; v != r.Value {
			t.Fatalf("kafkajs read %q at %d/%d, logctl read %q there", r.Value, r.Partition, r.Offset, v)
		}
		next[r.Partition]++
	}
	for _, p := range d.Partitions {
		if next[p.Partition] != p.End {
			t.Fatalf("after the reset, kafkajs read partition %d up to %d, its end is %d", p.Partition, next[p.Partition], p.End)
		}
	}
	waitCommittedAtEnd(t, ctx, nd, "mx", parts)
}

// TestKafkaKafkajsResetOffsets: kafkajs's admin.resetOffsets commits -2
// (earliest) or -1 (latest), which its consumer resolves with its own
// reset policy (fromBeginning), as against Kafka, whose brokers store the
// -2 and -1 as sent; logd removes the partition's committed offset
// instead, so OffsetFetch answers -1 and the consumer resolves it the same
// way (docs/kafka.md, "Consumer groups"). admin.setOffsets commits offsets
// of a group without members; one past the end is removed too. A consumer
// with fromBeginning then reads partition 0 from the offset set and
// partition 1 (past the end) whole. In make fault, resetOffsets latest
// follows, and a consumer without fromBeginning reads only what is written
// after it joined. Each kafkajs admin step takes about 5 s (its consumer
// waits out a fetch of paused partitions, maxWaitTime).
func TestKafkaKafkajsResetOffsets(t *testing.T) {
	e2e.ParallelShort(t)
	bin := kafkajsNode(t)
	const parts, n = 2, 20
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, kafkaGroupArgs(kaddr)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "jsreset", parts, nil)
	c, err := client.New(nd.Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var recs []client.Record
	for i := range n {
		recs = append(recs, client.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "early-%05d", i)})
	}
	if _, err := c.Produce(ctx, "jsreset", recs); err != nil {
		t.Fatal(err)
	}
	stored := readByValue(t, ctx, nd, "jsreset")
	var end [parts]int64
	for _, r := range stored {
		end[r.Partition] = max(end[r.Partition], r.Offset+1)
	}
	if end[0] < 2 || end[1] < 1 {
		t.Fatalf("partition ends %v: the keys did not spread", end)
	}

	type offset struct {
		Partition int32  `json:"partition"`
		Offset    string `json:"offset"`
	}
	adminSteps := func(want [][]offset, steps ...map[string]any) {
		t.Helper()
		var res struct {
			Steps [][]offset    `json:"steps"`
			Error *kafkajsError `json:"error"`
		}
		runKafkajs(t, ctx, bin, "admin-offsets", map[string]any{"broker": kaddr, "group": "jsr", "topic": "jsreset", "steps": steps}, &res)
		if res.Error != nil {
			t.Fatalf("kafkajs admin offsets: step %d of %d failed: %+v", len(res.Steps)+1, len(steps), res.Error)
		}
		if !reflect.DeepEqual(res.Steps, want) {
			t.Fatalf("offsets after each step: %v, want %v", res.Steps, want)
		}
	}
	consume := func(fromBeginning bool, produce, expect int, prefix string) map[string]int64 {
		t.Helper()
		var g kafkajsGroup
		runKafkajs(t, ctx, bin, "group", map[string]any{"broker": kaddr, "topic": "jsreset", "partitions": parts, "group": "jsr",
			"members": 1, "produce": produce, "prefix": prefix, "expect": expect, "settleMs": 300, "timeoutMs": 30_000, "fromBeginning": fromBeginning}, &g)
		if !g.Assigned || !g.Complete || len(g.Members) != 1 {
			t.Fatalf("kafkajs group: assigned %v, complete %v, %d members", g.Assigned, g.Complete, len(g.Members))
		}
		got := map[string]int64{}
		for _, r := range g.Members[0].Records {
			if _, dup := got[r.Value]; dup {
				t.Fatalf("kafkajs read %q twice", r.Value)
			}
			got[r.Value] = r.Offset
		}
		if len(got) != expect {
			t.Fatalf("kafkajs read %d records, want %d", len(got), expect)
		}
		return got
	}

	adminSteps([][]offset{{{0, "-1"}, {1, "-1"}}, {{0, "1"}, {1, "-1"}}},
		map[string]any{"reset": "earliest"},
		map[string]any{"set": []map[string]any{{"partition": 0, "offset": "1"}, {"partition": 1, "offset": fmt.Sprint(end[1] + 100)}}})
	got := consume(true, 0, n-1, "")
	for v, r := range stored {
		if _, ok := got[v]; ok != (r.Partition == 1 || r.Offset >= 1) {
			t.Fatalf("%s at %d/%d: read %v", v, r.Partition, r.Offset, ok)
		}
	}

	if !e2e.FaultLong() {
		return
	}
	adminSteps([][]offset{{{0, "-1"}, {1, "-1"}}}, map[string]any{"reset": "latest"})
	for v := range consume(false, 5, 5, "late") {
		if !strings.HasPrefix(v, "late-") {
			t.Fatalf("after a reset to latest, kafkajs read %q", v)
		}
	}
}
