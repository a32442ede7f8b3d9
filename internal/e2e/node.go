package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// Logctl runs logctl against nd and returns its stdout; it fails the test
// if logctl fails.
func Logctl(t testing.TB, nd *Node, args ...string) string {
	t.Helper()
	out, err := TryLogctl(t, nd, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TryLogctl runs logctl against nd and returns its stdout, or an error
// with its output when it fails.
func TryLogctl(t testing.TB, nd *Node, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(LogctlBinary(t), append([]string{"--server", nd.Listen}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("logctl %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// Tail returns the last n bytes of s, or s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Node is one logd process under test. Its data dir, addresses and log
// file stay the same across restarts; the log file is printed when the
// test fails. A test may set Args and Env before a start and replace Cmd
// to start logd its own way (Cmdline gives the arguments).
type Node struct {
	T       testing.TB
	ID      string                         // --node-id
	DataDir string                         // --data-dir
	Listen  string                         // --listen, the client API's 127.0.0.1:port
	Raft    string                         // --raft-addr
	Binary  string                         // the logd to run; "": Logd()
	Args    []string                       // more flags, after the harness's own
	Env     []string                       // added to the test's environment, KEY=VALUE
	Cmd     *exec.Cmd                      // nil while not running
	Logs    *os.File                       // the process's stdout and stderr
	RPC     logdv1connect.LogServiceClient // the API at Listen
}

// NewNode prepares a node (not started) with extra flags, killed at the
// end of the test.
func NewNode(t testing.TB, id string, extra ...string) *Node {
	t.Helper()
	nd := &Node{T: t, ID: id, DataDir: t.TempDir(), Listen: FreeAddr(t), Raft: FreeAddr(t), Args: extra}
	logs, err := os.Create(filepath.Join(t.TempDir(), id+".log"))
	if err != nil {
		t.Fatal(err)
	}
	nd.Logs = logs
	nd.RPC = logdv1connect.NewLogServiceClient(&http.Client{Timeout: 10 * time.Second}, "http://"+nd.Listen)
	t.Cleanup(func() {
		nd.Kill()
		logs.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("%s output:\n%s", id, Tail(string(b), 4000))
			keepLogs(t, id, b)
		}
	})
	return nd
}

// EnvKeepLogs names a directory where a failed test's nodes leave their
// whole output (DIR/TestName/ID.log; make fault sets it): the test's own
// log shows only each node's last lines.
const EnvKeepLogs = "LOGD_E2E_LOGS"

// keepLogs writes node id's output b under $LOGD_E2E_LOGS, if set.
func keepLogs(t testing.TB, id string, b []byte) {
	root := os.Getenv(EnvKeepLogs)
	if root == "" {
		return
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keep %s's output: %v", id, err)
		return
	}
	name := filepath.Join(dir, id+".log")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Logf("keep %s's output: %v", id, err)
		return
	}
	t.Logf("%s's whole output: %s", id, name)
}

// SingleNodeRaft returns the Raft timeouts' flags for a node that stays
// alone. At every start it waits one to two heartbeat timeouts before it
// elects itself (replication/raft_stores.go), which the default of 300 ms spends on
// each of the many starts and restarts of the tests. Alone, it has no
// follower to miss a heartbeat and is its own quorum, so the short timeout
// calls no election while it runs. Flags given after them win.
func SingleNodeRaft() []string { return []string{"--raft-heartbeat-timeout", "50ms"} }

// MetaGroupOnly returns the flag that keeps a node's partitions in the
// meta group, as before data groups (logd's default places new topics
// over data groups): for the tests of that path, whose Raft log,
// snapshots, catch-up, backups (which do not cover data groups yet),
// admission bounds and membership changes are one group's.
func MetaGroupOnly() []string { return []string{"--data-groups-per-node", "0"} }

// StartNode starts a single-node cluster, node "n1", and waits until it
// leads.
func StartNode(t testing.TB, extra ...string) *Node {
	t.Helper()
	nd := NewNode(t, "n1", append(SingleNodeRaft(), extra...)...)
	nd.Start()
	return nd
}

// TestWALSegment is the raft-wal segment size of test nodes, the
// smallest allowed: Raft's log is cut after a snapshot by whole sealed
// segments, and the tests' few hundred entries would never fill the
// default 64 MiB one, so a restarted or new node would replay the whole
// log where the tests mean it to install a snapshot. A test's own
// --raft-wal-segment-size comes later and wins.
const TestWALSegment = "65536"

// Cmdline returns logd's arguments; join is a member's API address or "".
func (nd *Node) Cmdline(join string) []string {
	args := append([]string{"--data-dir", nd.DataDir, "--listen", nd.Listen, "--raft-addr", nd.Raft, "--node-id", nd.ID,
		"--raft-wal-segment-size", TestWALSegment}, nd.Args...)
	if join != "" {
		args = append(args, "--join", join)
	}
	return args
}

// Launch starts the process without waiting for it.
func (nd *Node) Launch(join string) {
	nd.T.Helper()
	nd.LaunchWith(join)
}

// LaunchWith is Launch with env (KEY=VALUE) added to the test's
// environment and Env for this start only.
func (nd *Node) LaunchWith(join string, env ...string) {
	nd.T.Helper()
	bin := nd.Binary
	if bin == "" {
		bin = Logd()
	}
	nd.Cmd = exec.Command(bin, nd.Cmdline(join)...)
	if len(nd.Env) > 0 || len(env) > 0 {
		nd.Cmd.Env = slices.Concat(os.Environ(), nd.Env, env)
	}
	nd.Cmd.Stdout = nd.Logs
	nd.Cmd.Stderr = nd.Logs
	nd.Cmd.SysProcAttr = childAttrs()
	if err := nd.Cmd.Start(); err != nil {
		nd.T.Fatal(err)
	}
}

// Start launches a single node and waits until it leads and has caught up
// (a produce needs it to lead).
func (nd *Node) Start() {
	nd.T.Helper()
	nd.Launch("")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	WaitFor(nd.T, ctx, nd.ID+" leads", func() bool {
		st, err := nd.Status(ctx)
		return err == nil && st.Ready && st.State == "Leader"
	})
}

// Kill SIGKILLs the process (a stopped one too) and reaps it.
func (nd *Node) Kill() {
	if nd.Cmd == nil || nd.Cmd.Process == nil {
		return
	}
	nd.Cmd.Process.Signal(syscall.SIGCONT)
	nd.Cmd.Process.Signal(syscall.SIGKILL)
	nd.Cmd.Wait()
	nd.Cmd = nil
}

// Stop SIGTERMs the process and requires a clean exit within 20 s.
func (nd *Node) Stop() {
	nd.T.Helper()
	if nd.Cmd == nil {
		return
	}
	nd.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- nd.Cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			nd.T.Fatalf("%s exited with %v after SIGTERM", nd.ID, err)
		}
	case <-time.After(20 * time.Second):
		nd.Cmd.Process.Kill()
		<-done
		nd.T.Fatalf("%s did not stop within 20s of SIGTERM", nd.ID)
	}
	nd.Cmd = nil
}

// Signal sends sig to the process, if it runs; after SIGSTOP it returns
// once every thread of it is stopped (WaitStopped).
func (nd *Node) Signal(sig syscall.Signal) {
	if nd.Cmd == nil {
		return
	}
	nd.Cmd.Process.Signal(sig)
	if sig == syscall.SIGSTOP {
		WaitStopped(nd.Cmd.Process.Pid)
	}
}

// WaitStopped waits (at most 5 s) until every thread of process pid is
// stopped. kill(2) only queues SIGSTOP: a thread still runs until it
// next enters the kernel, and a test that writes right after pausing a
// follower must not have that follower append the write first.
func WaitStopped(pid int) {
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

// Status asks the node for its status, waiting at most a second.
func (nd *Node) Status(ctx context.Context) (*logdv1.StatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, err := nd.RPC.Status(cctx, connect.NewRequest(&logdv1.StatusRequest{}))
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}

// CreateTopic creates a topic through nd; it fails the test if that fails.
// A call refused by a leader change is sent again (Unapplied), and so is
// one whose outcome is unknown (the leadership lost while it committed):
// then "already exists" is the first call's success.
func CreateTopic(t testing.TB, ctx context.Context, nd *Node, name string, parts int32, config map[string]string) {
	t.Helper()
	unknown := false
	for {
		err := Unapplied(ctx, func() error {
			_, err := nd.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: name, Partitions: parts, Config: config}))
			return err
		})
		switch {
		case err == nil:
			return
		case unknown && connect.CodeOf(err) == connect.CodeAlreadyExists:
			return
		case connect.CodeOf(err) == connect.CodeDeadlineExceeded && ctx.Err() == nil:
			unknown = true
			continue
		}
		t.Fatal(err)
	}
}

// ProduceOnce appends record r through nd once: a call refused unapplied
// is sent again (Unapplied), and so is one whose outcome is unknown (the
// leadership of the partition's group lost while it committed), with the
// idempotency key r must carry, which makes the first call's append the
// answer of the next. A data group's leader may move under a loaded
// machine where a test means only to write.
func ProduceOnce(ctx context.Context, nd *Node, topic string, r *logdv1.Record) (*logdv1.ProduceResponse, error) {
	if r.IdempotencyKey == "" {
		return nil, fmt.Errorf("produce once to %s: the record needs an idempotency key", topic)
	}
	for {
		var resp *connect.Response[logdv1.ProduceResponse]
		err := Unapplied(ctx, func() error {
			var err error
			resp, err = nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: topic, Records: []*logdv1.Record{r}}))
			return err
		})
		switch {
		case err == nil:
			return resp.Msg, nil
		case connect.CodeOf(err) == connect.CodeDeadlineExceeded && ctx.Err() == nil:
			continue
		}
		return nil, err
	}
}

// ReadAll reads every partition of a topic from its start to its end. A
// fetch may answer no records and a later next offset (a compacted range).
// A failed fetch fails the test.
func (nd *Node) ReadAll(ctx context.Context, topic string, partitions int32) map[int32][]*logdv1.FetchedRecord {
	nd.T.Helper()
	out, err := nd.TryReadAll(ctx, topic, partitions)
	if err != nil {
		nd.T.Fatal(err)
	}
	return out
}

// TryReadAll is ReadAll answering a failed fetch's error.
func (nd *Node) TryReadAll(ctx context.Context, topic string, partitions int32) (map[int32][]*logdv1.FetchedRecord, error) {
	out := map[int32][]*logdv1.FetchedRecord{}
	for part := range partitions {
		for off := int64(0); ; {
			resp, err := nd.RPC.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: topic, Partition: part, Offset: off, MaxBytes: 1 << 20}))
			if err != nil {
				return nil, fmt.Errorf("%s: fetch %s-%d@%d: %w", nd.ID, topic, part, off, err)
			}
			out[part] = append(out[part], resp.Msg.Records...)
			if resp.Msg.NextOffset <= off || resp.Msg.NextOffset >= resp.Msg.EndOffset {
				break
			}
			off = resp.Msg.NextOffset
		}
	}
	return out, nil
}
