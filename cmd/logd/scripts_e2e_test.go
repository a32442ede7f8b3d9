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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/e2e"
)

// scriptPorts are the ports the scripts of a test use: make run's node
// on api, raft and kafka, and the three nodes of scripts/cluster.sh from
// the same bases (LOGD_CLUSTER_PORT, LOGD_CLUSTER_KAFKA_PORT), so that
// the cluster's n1 collides with make run's node as the README says.
type scriptPorts struct{ base int }

func (p scriptPorts) api(n int) string   { return fmt.Sprintf("127.0.0.1:%d", p.base+10*(n-1)) }
func (p scriptPorts) raft(n int) string  { return fmt.Sprintf("127.0.0.1:%d", p.base+10*(n-1)+1) }
func (p scriptPorts) kafka(n int) string { return fmt.Sprintf("127.0.0.1:%d", p.base+10*(n-1)+5) }

// freeScriptPorts finds a base whose nine ports are free (below the
// ephemeral range, as e2e.FreeAddr).
func freeScriptPorts(t *testing.T) scriptPorts {
	t.Helper()
	for range 200 {
		p := scriptPorts{base: 20000 + 10*rand.IntN(1100)}
		ok := true
		for n := 1; n <= 3 && ok; n++ {
			for _, a := range []string{p.api(n), p.raft(n), p.kafka(n)} {
				if !e2e.ClaimAddr(a) {
					ok = false
					break
				}
			}
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free port range after 200 tries")
	return scriptPorts{}
}

// script runs scripts/NAME with env added and returns its output and
// error.
func script(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join("..", "..", "scripts", name), args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// ready says whether a node answers /readyz at addr.
func ready(addr string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// listening says whether something accepts connections at addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// TestScriptsRefuseToJoinARunningNode runs the bad sequence docs/guide.md
// warns of, make run and then make cluster: the cluster script refuses,
// starts and joins nothing, and its stop leaves make run's node alone; a
// data directory the script did not create is refused too. Then the
// cluster starts with the port free, make run refuses beside it, and stop
// stops its three nodes.
func TestScriptsRefuseToJoinARunningNode(t *testing.T) {
	e2e.ParallelShort(t)
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s: %v", tool, err)
			}
			t.Skipf("%s: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := freeScriptPorts(t)
	dir := t.TempDir()
	data, clusterDir := filepath.Join(dir, "data"), filepath.Join(dir, "data", "cluster")
	runEnv := []string{"LOGD_BIN=" + e2e.Logd(), "LOGD_DATA_DIR=" + data, "LOGD_LISTEN=" + p.api(1), "LOGD_RAFT_ADDR=" + p.raft(1), "LOGD_KAFKA_LISTEN=" + p.kafka(1)}
	clusterEnv := []string{"LOGD_BIN=" + e2e.Logd(), "LOGD_CLUSTER_DIR=" + clusterDir,
		fmt.Sprintf("LOGD_CLUSTER_PORT=%d", p.base), fmt.Sprintf("LOGD_CLUSTER_KAFKA_PORT=%d", p.base+5)}

	// make run, in its own terminal.
	run := exec.Command(filepath.Join("..", "..", "scripts", "run.sh"))
	run.Env = append(os.Environ(), runEnv...)
	var runLog lockedBuffer
	run.Stdout, run.Stderr = &runLog, &runLog
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- run.Wait() }()
	stopRun := func() {
		run.Process.Signal(syscall.SIGTERM)
		select {
		case <-runDone:
		case <-time.After(20 * time.Second):
			run.Process.Kill()
			<-runDone
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("make run's log:\n%s", e2e.Tail(runLog.String(), 30))
		}
	}()
	e2e.WaitFor(t, ctx, "make run's node ready", func() bool { return ready(p.api(1)) })

	// make cluster beside it: refused, nothing started.
	out, err := script(ctx, clusterEnv, "cluster.sh", "start")
	if err == nil || !strings.Contains(out, "refusing to start") || !strings.Contains(out, p.api(1)+" is in use") {
		stopRun()
		t.Fatalf("cluster.sh start over make run's node: %v\n%s", err, out)
	}
	for n := 1; n <= 3; n++ {
		if _, err := os.Stat(filepath.Join(clusterDir, fmt.Sprintf("n%d", n))); !os.IsNotExist(err) {
			t.Errorf("n%d's data directory after the refusal: %v", n, err)
		}
		if n > 1 && listening(p.api(n)) {
			t.Errorf("n%d listens after the refusal", n)
		}
	}
	status := e2e.Logctl(t, &e2e.Node{Listen: p.api(1)}, "cluster", "status")
	if strings.Count(status, " voter ") != 1 || strings.Contains(status, "n2") || strings.Contains(status, "n3") {
		t.Errorf("make run's node after the refusal, want one voter:\n%s", status)
	}
	// make cluster-stop signals nothing it did not start.
	if out, err := script(ctx, clusterEnv, "cluster.sh", "stop"); err != nil {
		t.Errorf("cluster.sh stop: %v\n%s", err, out)
	}
	if !ready(p.api(1)) {
		t.Error("make cluster-stop stopped make run's node")
	}
	// Node data the script did not create.
	foreign := filepath.Join(dir, "foreign")
	if err := os.MkdirAll(filepath.Join(foreign, "n2"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = script(ctx, append(clusterEnv, "LOGD_CLUSTER_DIR="+foreign), "cluster.sh", "start")
	if err == nil || !strings.Contains(out, "did not create") {
		t.Errorf("cluster.sh start over foreign data: %v\n%s", err, out)
	}
	stopRun()

	// With make run stopped, the cluster starts, and make run refuses.
	start := time.Now()
	out, err = script(ctx, clusterEnv, "cluster.sh", "start")
	defer script(context.Background(), clusterEnv, "cluster.sh", "stop")
	if err != nil || !strings.Contains(out, "A three-node cluster is running") {
		t.Fatalf("cluster.sh start: %v\n%s", err, out)
	}
	t.Logf("cluster.sh start took %v", time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(filepath.Join(clusterDir, "cluster.id")); err != nil {
		t.Errorf("no cluster.id: %v", err)
	}
	out, err = script(ctx, runEnv, "run.sh")
	if err == nil || !strings.Contains(out, "refusing to start") {
		t.Errorf("run.sh beside the cluster: %v\n%s", err, out)
	}
	if out, err := script(ctx, clusterEnv, "cluster.sh", "stop"); err != nil || strings.Count(out, "stopped") != 3 {
		t.Errorf("cluster.sh stop: %v\n%s", err, out)
	}
	for n := 1; n <= 3; n++ {
		if listening(p.api(n)) {
			t.Errorf("n%d still listens after cluster.sh stop", n)
		}
	}
}

// TestJoinRefusesOwnCluster: a node whose data dir holds the cluster it
// bootstrapped alone (make run's ./data) refuses --join, and exits,
// rather than merge its Raft log into another cluster; without --join it
// runs as before.
func TestJoinRefusesOwnCluster(t *testing.T) {
	other := e2e.StartNode(t)
	nd := e2e.StartNode(t)
	nd.Stop()
	nd.Launch(other.Listen)
	done := make(chan error, 1)
	go func() { done <- nd.Cmd.Wait() }()
	select {
	case err := <-done:
		nd.Cmd = nil
		if err == nil {
			t.Fatal("logd --join over its own cluster's data exited 0")
		}
	case <-time.After(30 * time.Second):
		nd.Cmd.Process.Kill()
		<-done
		nd.Cmd = nil
		t.Fatal("logd --join over its own cluster's data still runs after 30s")
	}
	logs, err := os.ReadFile(nd.Logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "refusing --join "+other.Listen) || !strings.Contains(string(logs), "only member") {
		t.Fatalf("no refusal in the node's output:\n%s", e2e.Tail(string(logs), 2000))
	}
	st, err := other.Status(context.Background())
	if err != nil || len(st.GetMembers()) != 1 {
		t.Fatalf("the other cluster after the refusal: %v, %v", st, err)
	}
	nd.Start() // without --join, its own cluster again
}

// TestClusterSecureStep: README.md, docs/guide.md and the refusal of
// make cluster-secure over a cluster started without it give the same
// step from make cluster to make cluster-secure.
func TestClusterSecureStep(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skipf("bash: %v", err)
	}
	const step = "make cluster-stop && rm -rf ./data/cluster"
	for _, doc := range []string{"README.md", "docs/guide.md"} {
		text, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(text)), " "), step) {
			t.Errorf("%s does not give the step %q", doc, step)
		}
	}
	// A cluster the script created without --secure, in the default
	// ./data/cluster of the directory it runs in; nothing of it runs.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data", "cluster", "n1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "cluster", "cluster.id"), []byte("logd-cluster test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	p := freeScriptPorts(t)
	cmd := exec.CommandContext(t.Context(), "bash", script, "start", "--secure")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LOGD_CLUSTER_DIR=", "LOGD_BIN=/nonexistent/logd",
		fmt.Sprintf("LOGD_CLUSTER_PORT=%d", p.base), fmt.Sprintf("LOGD_CLUSTER_KAFKA_PORT=%d", p.base+5))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to start") || !strings.Contains(string(out), step) {
		t.Fatalf("make cluster-secure over a cluster started without it: %v\n%s\nwant a refusal giving the step %q", err, out, step)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "cluster", "secure")); err == nil {
		t.Error("the refused start marked the cluster secure")
	}
}
