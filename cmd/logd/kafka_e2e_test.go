package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// kafkaGroupArgs are the flags of a node whose Kafka listener on addr
// serves consumer groups to a test: a fresh group waits 100 ms for more
// members instead of Kafka's 3 s, so a test's consumers, started one after
// the other, do not each add that wait (a later one joins with a
// rebalance, which the tests expect anyway).
func kafkaGroupArgs(addr string) []string {
	return []string{"--kafka-listen", addr, "--kafka-group-initial-rebalance-delay", "100ms"}
}

// kcat returns the path of kcat (scripts/test-tools.sh installs it; make
// test runs that first). Without it the test skips, except under CI=true,
// where a missing tool is a broken setup and fails.
func kcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kcat is not installed: scripts/test-tools.sh installs it (make test runs it)")
		}
		t.Skip("kcat is not installed: run scripts/test-tools.sh (make test does) to run this test")
	}
	return p
}

// runKcat runs kcat with args and returns its stdout.
func runKcat(t *testing.T, ctx context.Context, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, e2e.Tail(stderr.String(), 2000))
	}
	return stdout.String()
}

// TestKafkaKcat runs kcat, librdkafka's command line client, against the
// built logd: -L lists the broker and the topic, -P writes every line of a
// file of 10,000 records (100,000 in make fault), -C from the beginning to
// the end reads every one of them back, once, and logd's own API reads the
// same records.
func TestKafkaKcat(t *testing.T) {
	bin := kcat(t)
	n := 10_000
	if e2e.FaultLong() {
		n = 100_000
	}
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, "--kafka-listen", kaddr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "kcat", 3, nil)

	meta := runKcat(t, ctx, bin, "-b", kaddr, "-L", "-t", "kcat")
	for _, want := range []string{"broker 1 at " + kaddr + " (controller)", `topic "kcat" with 3 partitions`, "partition 2, leader 1, replicas: 1, isrs: 1"} {
		if !strings.Contains(meta, want) {
			t.Fatalf("kcat -L lacks %q:\n%s", want, meta)
		}
	}

	file := filepath.Join(t.TempDir(), "records.txt")
	var sb strings.Builder
	want := map[string]bool{}
	for i := range n {
		v := fmt.Sprintf("record-%06d", i)
		want[v] = true
		sb.WriteString(v)
		sb.WriteByte('\n')
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runKcat(t, ctx, bin, "-b", kaddr, "-P", "-t", "kcat", "-l", file)
	produced := time.Since(start)

	start = time.Now()
	out := runKcat(t, ctx, bin, "-b", kaddr, "-C", "-t", "kcat", "-o", "beginning", "-e", "-q", "-f", "%s\n")
	consumed := time.Since(start)
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if got[line] {
			t.Fatalf("kcat -C read %q twice", line)
		}
		if !want[line] {
			t.Fatalf("kcat -C read %q, never produced", line)
		}
		got[line] = true
	}
	if len(got) != n {
		t.Fatalf("kcat -C read %d of %d records", len(got), n)
	}
	t.Logf("kcat: %d records produced in %v, consumed in %v (under shared load)", n, produced, consumed)

	// The same records through logd's own API.
	total := 0
	for _, recs := range nd.ReadAll(ctx, "kcat", 3) {
		for _, r := range recs {
			if !want[string(r.Value)] {
				t.Fatalf("logd's API read %q", r.Value)
			}
		}
		total += len(recs)
	}
	if total != n {
		t.Fatalf("logd's API read %d of %d records", total, n)
	}
}

// kcatTLS is kcat's configuration for TLS with dir's CA and, unless user
// is "", the client certificate of user (logd cert output).
func kcatTLS(dir, user string) []string {
	args := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + filepath.Join(dir, "ca.crt")}
	if user != "" {
		args = append(args, "-X", "ssl.certificate.location="+filepath.Join(dir, user+".crt"), "-X", "ssl.key.location="+filepath.Join(dir, user+".key"))
	}
	return args
}

// kcatFails runs kcat and requires it to fail; it returns its output.
func kcatFails(t *testing.T, ctx context.Context, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("kcat %s succeeded:\n%s", strings.Join(args, " "), e2e.Tail(string(out), 2000))
	}
	return string(out)
}

// TestKafkaKcatTLS runs kcat over TLS against a node under --auth
// required whose certificates come from logd cert: with a client
// certificate whose principal the ACLs allow, -L lists only the topics it
// may describe, -P writes 1,000 records and -C reads every one back; a
// produce to a topic it may only read is refused (Topic authorization
// failed) and writes nothing; kcat without a certificate, with a
// certificate of another CA, or without TLS gets nothing.
func TestKafkaKcatTLS(t *testing.T) {
	bin := kcat(t)
	const n = 1000
	dir := certDir(t) // the CA, n1 and alice
	issueNow(t, "client", "--dir", dir, "--name", "admin")
	kaddr := e2e.FreeAddr(t)
	nd := secureNode(t, dir, "n1", "--kafka-listen", kaddr)
	nd.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, topic := range []string{"tls", "readonly", "private"} {
		e2e.CreateTopic(t, ctx, nd, topic, 1, nil)
	}
	var acls []*logdv1.ACL
	for _, g := range []struct{ topic, op string }{{"tls", "write"}, {"tls", "read"}, {"readonly", "read"}} {
		acls = append(acls, &logdv1.ACL{Principal: "User:alice", Resource: "topic", Pattern: "literal", Name: g.topic, Operation: g.op, Effect: "allow"})
	}
	if _, err := nd.RPC.CreateACLs(ctx, connect.NewRequest(&logdv1.CreateACLsRequest{Acls: acls})); err != nil {
		t.Fatal(err)
	}
	alice := append([]string{"-b", kaddr}, kcatTLS(dir, "alice")...)

	meta := runKcat(t, ctx, bin, append(alice, "-L")...)
	if !strings.Contains(meta, `topic "tls" with 1 partitions`) || !strings.Contains(meta, `topic "readonly"`) || strings.Contains(meta, `"private"`) {
		t.Fatalf("kcat -L as alice: want tls and readonly, not private:\n%s", meta)
	}

	file := filepath.Join(t.TempDir(), "records.txt")
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "tls-%04d\n", i)
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runKcat(t, ctx, bin, append(alice, "-P", "-t", "tls", "-l", file)...)
	out := runKcat(t, ctx, bin, append(alice, "-C", "-t", "tls", "-o", "beginning", "-e", "-q", "-f", "%s\n")...)
	if out != sb.String() {
		t.Fatalf("kcat -C read %d bytes, not the %d records produced", len(out), n)
	}

	refused := kcatFails(t, ctx, bin, append(alice, "-P", "-t", "readonly", "-l", file)...)
	if !strings.Contains(refused, "uthorization failed") {
		t.Errorf("kcat -P to readonly: want an authorization failure:\n%s", e2e.Tail(refused, 2000))
	}
	if recs := nd.ReadAll(ctx, "readonly", 1)[0]; len(recs) != 0 {
		t.Fatalf("readonly holds %d records after a refused produce", len(recs))
	}

	// Refused, at once and in parallel: no certificate; a certificate of
	// another CA (kcat trusts the node, so the refusal is the node's); no
	// TLS; SASL, which is not served (the handshake names no mechanism).
	strangers := t.TempDir()
	issueNow(t, "ca", "--dir", strangers)
	issueNow(t, "client", "--dir", strangers, "--name", "alice")
	list := []string{"-b", kaddr, "-m", "3", "-L"}
	cases := map[string]struct {
		args []string
		want string
	}{
		"no certificate": {append(list, kcatTLS(dir, "")...), "Broker transport failure"},
		"another CA": {append(append(list, kcatTLS(dir, "")...), "-X", "ssl.certificate.location="+filepath.Join(strangers, "alice.crt"),
			"-X", "ssl.key.location="+filepath.Join(strangers, "alice.key")), "Broker transport failure"},
		"plaintext": {list, "Broker transport failure"},
		"sasl": {append(append(list, kcatTLS(dir, "alice")...), "-X", "security.protocol=sasl_ssl", "-X", "sasl.mechanism=PLAIN",
			"-X", "sasl.username=alice", "-X", "sasl.password=x"), "Unsupported SASL mechanism"},
	}
	type result struct {
		name string
		out  []byte
		err  error
	}
	results := make(chan result, len(cases))
	for name, tc := range cases {
		go func() {
			out, err := exec.CommandContext(ctx, bin, tc.args...).CombinedOutput()
			results <- result{name, out, err}
		}()
	}
	for range cases {
		r := <-results
		out := string(r.out)
		if r.err == nil || strings.Contains(out, `topic "tls"`) || !strings.Contains(out, cases[r.name].want) {
			t.Errorf("%s: kcat -L: %v, want a failure with %q:\n%s", r.name, r.err, cases[r.name].want, e2e.Tail(out, 2000))
		}
	}
}

// kcatMember is a `kcat -G` consumer process: its records (one per line)
// and its latest assignment, read from its output as it runs.
type kcatMember struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	values []string
	// assigned is the latest "assigned:" line librdkafka printed on a
	// rebalance ("" before the first, or after a revoke).
	assigned string
	stderr   strings.Builder
	done     chan struct{}
}

// startKcatMember starts `kcat -G group topic` with a quick session and
// heartbeat, reading from the earliest offset when the group has none and
// committing every 200ms.
func startKcatMember(t *testing.T, ctx context.Context, bin, addr, groupID, topic string) *kcatMember {
	t.Helper()
	m := &kcatMember{done: make(chan struct{})}
	m.cmd = exec.CommandContext(ctx, bin, "-b", addr, "-u", "-f", "%s\n",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200",
		"-G", groupID, topic)
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := m.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			m.mu.Lock()
			m.values = append(m.values, sc.Text())
			m.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			m.mu.Lock()
			m.stderr.WriteString(line + "\n")
			switch {
			case strings.Contains(line, "assigned:"):
				m.assigned = line[strings.Index(line, "assigned:"):]
			case strings.Contains(line, "revoked:"):
				m.assigned = ""
			}
			m.mu.Unlock()
		}
	}()
	go func() {
		wg.Wait()
		m.cmd.Wait()
		close(m.done)
	}()
	t.Cleanup(func() {
		m.cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			m.mu.Lock()
			t.Logf("kcat -G (pid %d) stderr:\n%s", m.cmd.Process.Pid, e2e.Tail(m.stderr.String(), 3000))
			m.mu.Unlock()
		}
	})
	return m
}

// assignment returns the partitions of the latest assignment.
func (m *kcatMember) assignment() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Count(m.assigned, "[")
}

// stop ends kcat as an operator would (SIGTERM): it commits what it
// consumed and leaves the group.
func (m *kcatMember) stop(t *testing.T) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("kcat did not exit within 30s of SIGTERM:\n%s", e2e.Tail(m.stderr.String(), 2000))
	}
}

// TestKafkaKcatGroup runs two `kcat -G` consumers (librdkafka's group
// consumer, range assignor) in one group: both are assigned partitions,
// between them they consume every record of the topic, and once they
// stopped, `logctl group describe` shows their committed offsets at the
// end of every partition. Then `logctl group reset-offsets --to-offset`
// moves the group back, and a kgo group consumer's next session starts
// every partition at the reset offset.
func TestKafkaKcatGroup(t *testing.T) {
	bin := kcat(t)
	const parts, n = 4, 2000
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, kafkaGroupArgs(kaddr)...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "kgroup", parts, nil)

	a := startKcatMember(t, ctx, bin, kaddr, "kg", "kgroup")
	b := startKcatMember(t, ctx, bin, kaddr, "kg", "kgroup")
	e2e.WaitFor(t, ctx, "both kcat consumers assigned partitions", func() bool {
		return a.assignment() > 0 && b.assignment() > 0 && a.assignment()+b.assignment() == parts
	})

	// Keyed records, spread over the partitions by the keys' hashes:
	// librdkafka's sticky partitioner would put a burst of keyless
	// records into one or two partitions, and then one member could have
	// nothing to read.
	file := filepath.Join(t.TempDir(), "records.txt")
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "k%d:g-%05d\n", i, i)
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runKcat(t, ctx, bin, "-b", kaddr, "-P", "-t", "kgroup", "-K", ":", "-l", file)

	seen := func() (map[string]int, int, int) {
		got := map[string]int{}
		counts := [2]int{}
		for i, m := range []*kcatMember{a, b} {
			m.mu.Lock()
			for _, v := range m.values {
				got[v]++
			}
			counts[i] = len(m.values)
			m.mu.Unlock()
		}
		return got, counts[0], counts[1]
	}
	e2e.WaitFor(t, ctx, "every record consumed by the group", func() bool { got, _, _ := seen(); return len(got) == n })
	// The group's Kafka members hold it: `logctl group delete` is
	// refused (as Kafka's NON_EMPTY_GROUP), and its offsets stay.
	lc, err := client.New(nd.Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	e2e.WaitFor(t, ctx, "the members' first commits", func() bool {
		d, err := lc.DescribeGroup(ctx, "kg")
		return err == nil && len(d.Partitions) > 0
	})
	out, err := exec.CommandContext(ctx, e2e.LogctlBinary(t), "--server", nd.Listen, "group", "delete", "kg").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "live") {
		t.Fatalf("logctl group delete of a group with live kcat members: %v\n%s", err, out)
	}
	a.stop(t)
	b.stop(t)
	got, na, nb := seen()
	for i := range n {
		if v := fmt.Sprintf("g-%05d", i); got[v] == 0 {
			t.Fatalf("%s not consumed", v)
		}
	}
	if na == 0 || nb == 0 {
		t.Fatalf("kcat consumers read %d and %d records; want both some", na, nb)
	}
	if na+nb != n {
		t.Logf("%d records read twice (at least once is what a rebalance promises)", na+nb-n)
	}

	describe := func() client.GroupDescription {
		var d client.GroupDescription
		if err := json.Unmarshal([]byte(e2e.Logctl(t, nd, "group", "describe", "kg", "-o", "json")), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	var d client.GroupDescription
	e2e.WaitFor(t, ctx, "the group's commits at the end", func() bool {
		d = describe()
		done := len(d.Partitions) == parts
		for _, p := range d.Partitions {
			done = done && p.Committed == p.End && p.LagRecords == 0
		}
		return done
	})
	if d.State != "empty" || len(d.Members) != 0 {
		t.Fatalf("group after kcat left: state %s, %d members of logd's protocol", d.State, len(d.Members))
	}

	e2e.Logctl(t, nd, "group", "reset-offsets", "kg", "--topic", "kgroup", "--to-offset", "5", "--execute")
	for _, p := range describe().Partitions {
		if want := min(5, p.End); p.Committed != want {
			t.Fatalf("after the reset, partition %d is committed at %d; want %d", p.Partition, p.Committed, want)
		}
	}
	var logMu sync.Mutex
	var kgoLog strings.Builder
	t.Cleanup(func() {
		if t.Failed() {
			logMu.Lock()
			t.Logf("kgo's log:\n%s", e2e.Tail(kgoLog.String(), 6000))
			logMu.Unlock()
		}
	})
	logger := kgo.BasicLogger(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return kgoLog.Write(p)
	}), kgo.LogLevelInfo, nil)
	cl, err := kgo.NewClient(kgo.WithLogger(logger), kgo.SeedBrokers(kaddr), kgo.ConsumerGroup("kg"), kgo.ConsumeTopics("kgroup"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end := map[int32]int64{}
	for _, p := range d.Partitions {
		end[p.Partition] = p.End
	}
	first, next := map[int32]int64{}, map[int32]int64{}
	reached := func() bool {
		for p, e := range end {
			if e > 5 && next[p] < e {
				return false
			}
		}
		return true
	}
	for !reached() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("kgo read up to %v after the reset, of %v: %v", next, end, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("kgo fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			} else if r.Offset < next[r.Partition] {
				t.Errorf("kgo read %d-%d again", r.Partition, r.Offset)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	for p, e := range end {
		if e > 5 && first[p] != 5 {
			t.Errorf("after the reset, kgo started partition %d at %d; want 5", p, first[p])
		}
	}
}
