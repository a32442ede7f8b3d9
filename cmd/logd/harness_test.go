package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
)

// The end-to-end harness: real logd processes on 127.0.0.1, alone or as a
// cluster, a producer loop that records what was attempted and
// acknowledged, and the checks every fault test ends with. The default run
// is short; LOGD_FAULT_LONG=1 (make fault) runs long versions.

// logdBinary is built once per test run by TestMain.
var logdBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "logd-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logdBinary = filepath.Join(dir, "logd")
	// A binary built with -race sleeps a second as it exits (GORACE's
	// atexit_sleep_ms, 1000 by default), time for goroutines still running
	// to report a race. logd joins its goroutines before it exits, and the
	// tests stop nodes and run logd's commands (directly and through
	// scripts/) again and again: each clean exit would cost that second.
	// A race found before the exit still makes it exit 66, which stop and
	// the commands' callers see. Set for the children unless GORACE
	// already chooses it.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	// One fault build for every test: its faults are inert unless a test
	// sets their environment (internal/faults, internal/failpoint).
	// The version is stamped as make build and make release stamp it
	// (TestBuildInfoStamped).
	out, err := exec.Command("go", "build", "-race", "-tags", "faults", "-ldflags", "-X "+buildinfoVersionVar+"="+e2eVersion, "-o", logdBinary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build logd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func faultLong() bool { return os.Getenv("LOGD_FAULT_LONG") == "1" }

// parallelShort lets a test run beside another in the default run (two at
// a time on two cores, after the package's serial tests): for tests that
// spend their time waiting on real processes, timers or schedules rather
// than on the CPU, that assert no timing, and that share nothing but the
// built binaries and the harness's port bookkeeping (freeAddr). make
// fault runs them one at a time, as their long versions load the machine.
func parallelShort(t *testing.T) {
	if !faultLong() {
		t.Parallel()
	}
}

var (
	logctlOnce   sync.Once
	logctlBinary string
	logctlErr    error
)

// buildLogctl builds cmd/logctl once for the tests that run it.
func buildLogctl(t *testing.T) string {
	t.Helper()
	logctlOnce.Do(func() {
		logctlBinary = filepath.Join(filepath.Dir(logdBinary), "logctl")
		out, err := exec.Command("go", "build", "-o", logctlBinary, "../logctl").CombinedOutput()
		if err != nil {
			logctlErr = fmt.Errorf("build logctl: %v\n%s", err, out)
		}
	})
	if logctlErr != nil {
		t.Fatal(logctlErr)
	}
	return logctlBinary
}

// logctl runs logctl against nd and returns its stdout.
func logctl(t *testing.T, nd *node, args ...string) string {
	t.Helper()
	cmd := exec.Command(buildLogctl(t), append([]string{"--server", nd.listen}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("logctl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// handedOut holds every address freeAddr returned in this test binary: a
// port is free when probed but the kernel may offer it again to the next
// probe before the first process binds it (seen as two nodes of one
// cluster given the same port).
var handedOut sync.Map

// The ports come from below Linux's default ephemeral range (32768-60999):
// a port the kernel hands out for ":0" listeners or as the source port of
// an outgoing connection (other test packages run beside this one, and
// the nodes and proxies dial each other all the time) can be taken in the
// moment between the probe and the node's bind, which failed a node's
// start with "address already in use". Below the range only another
// explicit bind competes for it.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
	t.Fatal("no unused port after 1000 tries")
	return ""
}

// waitFor calls cond every 10 ms until it holds, failing the test when ctx
// ends first. Polling real processes, there is no event to wait on.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// node is one logd process under test. Its data dir, addresses and log
// file stay the same across restarts; the log file is printed when the
// test fails.
type node struct {
	t       *testing.T
	id      string
	dataDir string
	listen  string
	raft    string
	args    []string
	env     []string  // added to the test's environment, KEY=VALUE
	cmd     *exec.Cmd // nil while not running
	logs    *os.File
	rpc     logdv1connect.LogServiceClient
}

// newNode prepares a node (not started) with extra flags, killed at the
// end of the test.
func newNode(t *testing.T, id string, extra ...string) *node {
	t.Helper()
	nd := &node{t: t, id: id, dataDir: t.TempDir(), listen: freeAddr(t), raft: freeAddr(t), args: extra}
	logs, err := os.Create(filepath.Join(t.TempDir(), id+".log"))
	if err != nil {
		t.Fatal(err)
	}
	nd.logs = logs
	nd.rpc = logdv1connect.NewLogServiceClient(&http.Client{Timeout: 10 * time.Second}, "http://"+nd.listen)
	t.Cleanup(func() {
		nd.kill()
		logs.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("%s output:\n%s", id, tail(string(b), 4000))
		}
	})
	return nd
}

// singleNodeRaft are Raft timeouts for a node that stays alone. At every
// start it waits one to two heartbeat timeouts before it elects itself
// (replication/raft_stores.go), which the default of 300 ms spends on
// each of the many starts and restarts of the tests. Alone, it has no
// follower to miss a heartbeat and is its own quorum, so the short timeout
// calls no election while it runs. Flags in extra come after and win.
var singleNodeRaft = []string{"--raft-heartbeat-timeout", "50ms"}

// startNode starts a single-node cluster and waits until it leads.
func startNode(t *testing.T, extra ...string) *node {
	t.Helper()
	nd := newNode(t, "n1", append(slices.Clone(singleNodeRaft), extra...)...)
	nd.start()
	return nd
}

// testWALSegment is the raft-wal segment size of test nodes, the
// smallest allowed: Raft's log is cut after a snapshot by whole sealed
// segments, and the tests' few hundred entries would never fill the
// default 64 MiB one, so a restarted or new node would replay the whole
// log where the tests mean it to install a snapshot. A test's own
// --raft-wal-segment-size comes later and wins.
const testWALSegment = "65536"

// cmdline returns logd's arguments; join is a member's API address or "".
func (nd *node) cmdline(join string) []string {
	args := append([]string{"--data-dir", nd.dataDir, "--listen", nd.listen, "--raft-addr", nd.raft, "--node-id", nd.id,
		"--raft-wal-segment-size", testWALSegment}, nd.args...)
	if join != "" {
		args = append(args, "--join", join)
	}
	return args
}

// launch starts the process without waiting for it.
func (nd *node) launch(join string) {
	nd.t.Helper()
	nd.cmd = exec.Command(logdBinary, nd.cmdline(join)...)
	if nd.env != nil {
		nd.cmd.Env = append(os.Environ(), nd.env...)
	}
	nd.cmd.Stdout = nd.logs
	nd.cmd.Stderr = nd.logs
	nd.cmd.SysProcAttr = childAttrs()
	if err := nd.cmd.Start(); err != nil {
		nd.t.Fatal(err)
	}
}

// start launches a single node and waits until it leads and has caught up
// (a produce needs it to lead).
func (nd *node) start() {
	nd.t.Helper()
	nd.launch("")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFor(nd.t, ctx, nd.id+" leads", func() bool {
		st, err := nd.status(ctx)
		return err == nil && st.Ready && st.State == "Leader"
	})
}

// kill SIGKILLs the process (a stopped one too) and reaps it.
func (nd *node) kill() {
	if nd.cmd == nil || nd.cmd.Process == nil {
		return
	}
	nd.cmd.Process.Signal(syscall.SIGCONT)
	nd.cmd.Process.Signal(syscall.SIGKILL)
	nd.cmd.Wait()
	nd.cmd = nil
}

// stop SIGTERMs the process and requires a clean exit within 20 s.
func (nd *node) stop() {
	nd.t.Helper()
	if nd.cmd == nil {
		return
	}
	nd.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- nd.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			nd.t.Fatalf("%s exited with %v after SIGTERM", nd.id, err)
		}
	case <-time.After(20 * time.Second):
		nd.cmd.Process.Kill()
		<-done
		nd.t.Fatalf("%s did not stop within 20s of SIGTERM", nd.id)
	}
	nd.cmd = nil
}

func (nd *node) signal(sig syscall.Signal) {
	if nd.cmd == nil {
		return
	}
	nd.cmd.Process.Signal(sig)
	if sig == syscall.SIGSTOP {
		waitStopped(nd.cmd.Process.Pid)
	}
}

// waitStopped waits (at most 5 s) until every thread of process pid is
// stopped. kill(2) only queues SIGSTOP: a thread still runs until it
// next enters the kernel, and a test that writes right after pausing a
// follower must not have that follower append the write first.
func waitStopped(pid int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return // gone, or no procfs
		}
		stopped := true
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread ended
			}
			// pid (comm) state ...: the state follows the last ')'.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (nd *node) status(ctx context.Context) (*logdv1.StatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, err := nd.rpc.Status(cctx, connect.NewRequest(&logdv1.StatusRequest{}))
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}

func createTopic(t *testing.T, ctx context.Context, nd *node, name string, parts int32, config map[string]string) {
	t.Helper()
	if _, err := nd.rpc.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: name, Partitions: parts, Config: config})); err != nil {
		t.Fatal(err)
	}
}

// readAll reads every partition of a topic from its start to its end. A
// fetch may answer no records and a later next offset (a compacted range).
func (nd *node) readAll(ctx context.Context, topic string, partitions int32) map[int32][]*logdv1.FetchedRecord {
	nd.t.Helper()
	out := map[int32][]*logdv1.FetchedRecord{}
	for part := range partitions {
		for off := int64(0); ; {
			resp, err := nd.rpc.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: topic, Partition: part, Offset: off, MaxBytes: 1 << 20}))
			if err != nil {
				nd.t.Fatalf("%s: fetch %s-%d@%d: %v", nd.id, topic, part, off, err)
			}
			out[part] = append(out[part], resp.Msg.Records...)
			if resp.Msg.NextOffset <= off || resp.Msg.NextOffset >= resp.Msg.EndOffset {
				break
			}
			off = resp.Msg.NextOffset
		}
	}
	return out
}

// ack is one acknowledged record.
type ack struct {
	partition int32
	offset    int64
	value     string
}

// check applies the fault tests' rules to what one node holds: every
// acknowledged record at its offset; offsets dense from 0; no value twice;
// nothing that was never attempted.
func check(t testing.TB, got map[int32][]*logdv1.FetchedRecord, acks []ack, attempted map[string]bool) {
	t.Helper()
	byValue := map[string]ack{}
	for part, recs := range got {
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Errorf("partition %d: record %d has offset %d (offsets must be dense from 0)", part, i, r.Offset)
			}
			v := string(r.Value)
			if prev, dup := byValue[v]; dup {
				t.Errorf("duplicate: %q at %d/%d and %d/%d", v, prev.partition, prev.offset, part, r.Offset)
			}
			byValue[v] = ack{part, r.Offset, v}
			if !attempted[v] {
				t.Errorf("unexpected: %q at %d/%d was never sent", v, part, r.Offset)
			}
		}
	}
	lost := 0
	for _, a := range acks {
		g, ok := byValue[a.value]
		if !ok {
			lost++
			if lost < 10 {
				t.Errorf("lost: %q acked at %d/%d", a.value, a.partition, a.offset)
			}
			continue
		}
		if g.partition != a.partition || g.offset != a.offset {
			t.Errorf("inconsistent: %q acked at %d/%d, read at %d/%d", a.value, a.partition, a.offset, g.partition, g.offset)
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged records lost", lost)
	}
}

// render prints a topic's records, partition by partition, for comparing
// two reads.
func render(m map[int32][]*logdv1.FetchedRecord) string {
	var parts []string
	for p, recs := range m {
		var b strings.Builder
		fmt.Fprintf(&b, "%d:", p)
		for _, r := range recs {
			fmt.Fprintf(&b, " %d=%s", r.Offset, r.Value)
		}
		parts = append(parts, b.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, "\n")
}

// cluster is a test cluster; nodes[0] bootstraps, the others join it.
type cluster struct {
	t     *testing.T
	nodes []*node
}

// newCluster starts n nodes with extra flags and waits until all are
// voters.
func newCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t}
	for i := range n {
		c.nodes = append(c.nodes, newNode(t, fmt.Sprintf("n%d", i+1), extra...))
	}
	c.start()
	return c
}

// start launches c's prepared nodes: nodes[0] bootstraps, the others join
// it; it waits until all are voters.
func (c *cluster) start() {
	t := c.t
	t.Helper()
	n := len(c.nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := c.nodes[0]
	first.launch("")
	waitFor(t, ctx, first.id+" ready", func() bool {
		st, err := first.status(ctx)
		return err == nil && st.Ready && st.LeaderId != ""
	})
	for _, nd := range c.nodes[1:] {
		nd.launch(first.listen)
	}
	c.waitVoters(ctx, n)
}

// waitVoters waits until the first live node sees n voters and a leader.
func (c *cluster) waitVoters(ctx context.Context, n int) {
	c.t.Helper()
	waitFor(c.t, ctx, fmt.Sprintf("%d voters", n), func() bool {
		for _, nd := range c.nodes {
			if nd.cmd == nil {
				continue
			}
			st, err := nd.status(ctx)
			if err != nil || st.LeaderId == "" {
				return false
			}
			voters := 0
			for _, m := range st.Members {
				if m.Suffrage == "voter" {
					voters++
				}
			}
			return voters == n
		}
		return false
	})
}

// leader returns the node that reports itself leader.
func (c *cluster) leader(ctx context.Context) *node {
	c.t.Helper()
	var out *node
	waitFor(c.t, ctx, "a leader", func() bool {
		for _, nd := range c.nodes {
			if nd.cmd == nil {
				continue
			}
			if st, err := nd.status(ctx); err == nil && st.State == "Leader" && st.Ready {
				out = nd
				return true
			}
		}
		return false
	})
	return out
}

// converge waits until every node is ready and has applied the same index.
func (c *cluster) converge(ctx context.Context) {
	c.t.Helper()
	c.convergeNodes(ctx, c.nodes)
}

// convergeNodes is converge for some of the nodes. One of them must be a
// ready leader: followers learn that the last entries are committed only
// from a leader, so without one they can agree on an index that still
// lacks acknowledged records.
func (c *cluster) convergeNodes(ctx context.Context, nodes []*node) {
	c.t.Helper()
	waitFor(c.t, ctx, "nodes converge under a leader", func() bool { return c.converged(ctx, nodes) })
}

// converged reports whether nodes are ready, one of them leads, and all
// have committed and applied the same index.
func (c *cluster) converged(ctx context.Context, nodes []*node) bool {
	var idx []uint64
	leaders := 0
	for _, nd := range nodes {
		st, err := nd.status(ctx)
		if err != nil || !st.Ready {
			return false
		}
		if st.State == "Leader" {
			leaders++
		}
		idx = append(idx, st.AppliedIndex, st.CommitIndex)
	}
	return leaders == 1 && slices.Min(idx) == slices.Max(idx)
}

// checkEveryNode checks each node's copy, and requires every node to hold
// the same records at the same offsets.
func (c *cluster) checkEveryNode(ctx context.Context, topic string, parts int32, acks []ack, attempted map[string]bool) {
	c.t.Helper()
	var first string
	for i, nd := range c.nodes {
		got := nd.readAll(ctx, topic, parts)
		check(c.t, got, acks, attempted)
		r := render(got)
		if i == 0 {
			first = r
		} else if r != first {
			c.t.Errorf("%s holds different records than %s", nd.id, c.nodes[0].id)
		}
	}
}

// producers are concurrent producers of unique values through the Go
// client (which follows the leader and retries only what was surely not
// written); they record every value attempted and every acknowledgement.
type producers struct {
	perCall int          // records per produce call
	lat     *latencies   // when set, the latency of each acknowledged call
	hc      *http.Client // when set, the clients' HTTP client (TLS, say)

	mu            sync.Mutex
	acks          []ack
	attempted     map[string]bool
	calls, failed int
}

func newProducers(perCall int) *producers {
	return &producers{perCall: perCall, attempted: map[string]bool{}}
}

// run is producer id: it writes through the node at seed until stop is
// closed. A failed call (refused or unknown) is never counted as lost.
func (ps *producers) run(ctx context.Context, t *testing.T, seed, topic string, id int, stop <-chan struct{}) {
	c, err := client.New(seed, client.Options{HTTPClient: ps.hc, Timeout: 3 * time.Second,
		Retry: client.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}})
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		recs := make([]client.Record, ps.perCall)
		ps.mu.Lock()
		for j := range recs {
			v := fmt.Sprintf("c%d-%d-%d", id, n, j)
			ps.attempted[v] = true
			// Keys spread the calls of single-record producers too.
			recs[j] = client.Record{Key: []byte(fmt.Sprintf("k%d", id+j)), Value: []byte(v)}
		}
		ps.mu.Unlock()
		start := time.Now()
		res, err := c.Produce(ctx, topic, recs)
		if err == nil && ps.lat != nil {
			ps.lat.add(time.Since(start))
		}
		ps.mu.Lock()
		ps.calls++
		if err == nil {
			for i, r := range res {
				ps.acks = append(ps.acks, ack{r.Partition, r.Offset, string(recs[i].Value)})
			}
		} else {
			ps.failed++
		}
		ps.mu.Unlock()
		if err != nil {
			// Back off while the cluster is down.
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func (ps *producers) ackCount() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.acks)
}

// waitAcks waits until n more records than now are acknowledged.
func (ps *producers) waitAcks(t *testing.T, ctx context.Context, what string, n int) {
	t.Helper()
	target := ps.ackCount() + n
	waitFor(t, ctx, what, func() bool { return ps.ackCount() >= target })
}
