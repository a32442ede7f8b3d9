package replication

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/replication/internal/fsmtest"
	"github.com/logd-dev/logd/replication/raftstore"
	"github.com/logd-dev/logd/replication/transport"
)

// The cost of idle Raft groups (make bench-groups): three processes on
// this machine, each running G groups of three voters with logd's Raft
// settings (timeouts, MaxAppendEntries, raft-wal) over one Raft port
// each, with sessions and the cluster secret, and an FSM that does
// nothing. After a warm-up in which every group elects a leader, each
// process counts, over a window, the CPU time it used and the Raft RPCs
// it received (heartbeats, appends, votes), and then the disk its groups'
// logs take. It asserts nothing: the figures size data groups
// (docs/performance.md) and are printed.

// groupCostChild is what the parent hands each child process.
type groupCostChild struct {
	ID      int           `json:"id"`
	Addrs   []string      `json:"addrs"`
	Groups  int           `json:"groups"`
	Dir     string        `json:"dir"`
	Segment int           `json:"segment"`
	Warmup  time.Duration `json:"warmup"`
	Window  time.Duration `json:"window"`
}

// groupCostResult is a child's figures.
type groupCostResult struct {
	CPUSeconds    float64 `json:"cpu_seconds"`
	RPCs          uint64  `json:"rpcs"`
	Leaders       int     `json:"leaders"`
	DiskAllocated int64   `json:"disk_allocated"`
	DiskApparent  int64   `json:"disk_apparent"`
	Goroutines    int     `json:"goroutines"`
}

// TestGroupCost runs the measurement for each G in LOGD_GROUP_COST
// (comma-separated, e.g. 12,48,96), with raft-wal segments of
// LOGD_GROUP_COST_SEGMENT bytes (default: raftstore's).
func TestGroupCost(t *testing.T) {
	spec := os.Getenv("LOGD_GROUP_COST")
	if spec == "" {
		t.Skip("measures idle Raft groups in three processes for a minute or more; make bench-groups runs it")
	}
	segment, _ := strconv.Atoi(os.Getenv("LOGD_GROUP_COST_SEGMENT"))
	window := 20 * time.Second
	if w, err := time.ParseDuration(os.Getenv("LOGD_GROUP_COST_WINDOW")); err == nil {
		window = w
	}
	var rows []string
	for _, f := range strings.Split(spec, ",") {
		g, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || g < 1 {
			t.Fatalf("LOGD_GROUP_COST: %q is not a group count", f)
		}
		res := runGroupCost(t, g, segment, window)
		var cpu, rpcs float64
		leaders := make([]string, len(res))
		var alloc, apparent int64
		for i, r := range res {
			cpu += r.CPUSeconds
			rpcs += float64(r.RPCs)
			leaders[i] = strconv.Itoa(r.Leaders)
			alloc += r.DiskAllocated
			apparent += r.DiskApparent
		}
		n := float64(len(res))
		rows = append(rows, fmt.Sprintf("%6d  %12.1f  %14.0f  %10.0f  %-9s  %14.2f  %14.2f  %10d",
			g, 100*cpu/n/window.Seconds(), rpcs/n/window.Seconds(), rpcs/n/window.Seconds()/float64(g),
			strings.Join(leaders, "/"), float64(alloc)/n/float64(g)/(1<<20), float64(apparent)/n/float64(g)/(1<<20), res[0].Goroutines))
	}
	fmt.Printf("\nIdle Raft groups, 3 processes on this machine, window %v, raft-wal segment %d bytes (0: default)\n", window, segment)
	fmt.Printf("%6s  %12s  %14s  %10s  %-9s  %14s  %14s  %10s\n", "GROUPS", "CPU %/PROC", "RPC/s IN/PROC", "PER GROUP", "LEADERS", "DISK MiB/GROUP", "APPARENT MiB/G", "GOROUTINES")
	for _, r := range rows {
		fmt.Println(r)
	}
}

// runGroupCost runs three child processes of g groups each and returns
// their figures.
func runGroupCost(t *testing.T, g, segment int, window time.Duration) []groupCostResult {
	t.Helper()
	addrs := make([]string, 3)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	warmup := 10*time.Second + time.Duration(g)*50*time.Millisecond
	type child struct {
		cmd *exec.Cmd
		out *bytes.Buffer
	}
	var children []child
	for i := range addrs {
		spec, _ := json.Marshal(groupCostChild{ID: i, Addrs: addrs, Groups: g, Dir: t.TempDir(), Segment: segment, Warmup: warmup, Window: window})
		cmd := exec.Command(os.Args[0], "-test.run=^TestGroupCostChild$", "-test.v")
		cmd.Env = append(os.Environ(), "LOGD_GROUP_COST_CHILD="+string(spec))
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children = append(children, child{cmd, out})
	}
	var res []groupCostResult
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, c.out)
		}
		var r groupCostResult
		found := false
		sc := bufio.NewScanner(c.out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "GROUPCOST "); ok {
				found = json.Unmarshal([]byte(rest), &r) == nil
			}
		}
		if !found {
			t.Fatalf("child %d printed no figures:\n%s", i, c.out)
		}
		res = append(res, r)
	}
	return res
}

// TestGroupCostChild is one process of TestGroupCost; it runs only as its
// child.
func TestGroupCostChild(t *testing.T) {
	raw := os.Getenv("LOGD_GROUP_COST_CHILD")
	if raw == "" {
		t.Skip("a child process of TestGroupCost")
	}
	var spec groupCostChild
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", spec.Addrs[spec.ID])
	if err != nil {
		t.Fatal(err)
	}
	self := fmt.Sprintf("n%d", spec.ID+1)
	port := transport.NewPort(ln, nil, nil, self, 4096, fsmtest.Logger())
	port.SetSecret(bytes.Repeat([]byte{7}, secretLen), true)
	port.Start()
	defer port.Close()
	servers := make([]raft.Server, len(spec.Addrs))
	for i, a := range spec.Addrs {
		servers[i] = raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: raft.ServerAddress(a)}
	}
	var rpcs atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rafts []*raft.Raft
	var closers []func() error
	for g := range spec.Groups {
		st, err := raftstore.Open(raftstore.Options{Dir: filepath.Join(spec.Dir, fmt.Sprintf("g%d", g)), LogStore: raftstore.LogStoreWAL,
			WALSegmentBytes: spec.Segment, Logger: fsmtest.Logger(), RaftLogger: hclog.NewNullLogger()})
		if err != nil {
			t.Fatal(err)
		}
		layer := port.Group(uint64(g))
		nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: hclog.NewNullLogger()})
		tr := &countingTransport{NetworkTransport: nt, n: &rpcs, ch: make(chan raft.RPC)}
		wg.Add(1)
		go tr.forward(stop, &wg)
		layer.Attach(func(string) bool { return true })
		cfg := Config{NodeID: self}
		cfg.setDefaults()
		rc := raftConfig(cfg, hclog.NewNullLogger())
		if err := raft.BootstrapCluster(rc, st.Logs, st.Stable, st.Snapshots, nt, raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		r, err := raft.NewRaft(rc, nopFSM{}, st.Logs, st.Stable, st.Snapshots, tr)
		if err != nil {
			t.Fatal(err)
		}
		rafts = append(rafts, r)
		closers = append(closers, nt.Close, st.Close)
	}
	time.Sleep(spec.Warmup)
	cpu0, n0 := selfCPU(t), rpcs.Load()
	time.Sleep(spec.Window)
	cpu1, n1 := selfCPU(t), rpcs.Load()
	res := groupCostResult{CPUSeconds: cpu1 - cpu0, RPCs: n1 - n0}
	for _, r := range rafts {
		if r.State() == raft.Leader {
			res.Leaders++
		}
	}
	res.Goroutines = goroutines()
	for _, r := range rafts {
		r.Shutdown().Error()
	}
	close(stop)
	wg.Wait()
	for _, c := range closers {
		c()
	}
	res.DiskAllocated, res.DiskApparent = diskUse(t, spec.Dir)
	b, _ := json.Marshal(res)
	fmt.Printf("GROUPCOST %s\n", b)
}

// countingTransport counts the RPCs a group receives, heartbeats (which
// Raft's transport hands its fast path) included.
type countingTransport struct {
	*raft.NetworkTransport
	n  *atomic.Uint64
	ch chan raft.RPC
}

// forward passes the transport's RPCs on, counted, until stop.
func (c *countingTransport) forward(stop chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case rpc := <-c.NetworkTransport.Consumer():
			c.n.Add(1)
			select {
			case c.ch <- rpc:
			case <-stop:
				return
			}
		case <-stop:
			return
		}
	}
}

// Consumer implements raft.Transport.
func (c *countingTransport) Consumer() <-chan raft.RPC { return c.ch }

// SetHeartbeatHandler implements raft.Transport: heartbeats are counted.
func (c *countingTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	c.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		c.n.Add(1)
		cb(rpc)
	})
}

// nopFSM is a state machine that keeps nothing.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

// selfCPU is the CPU time this process used so far, in seconds.
func selfCPU(t *testing.T) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// goroutines is the number of goroutines of this process.
func goroutines() int {
	b := make([]byte, 64<<20)
	n := runtime.Stack(b, true)
	return bytes.Count(b[:n], []byte("\ngoroutine ")) + 1
}

// diskUse returns the bytes the files under dir take on disk and their
// apparent sizes.
func diskUse(t *testing.T, dir string) (allocated, apparent int64) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return err
		}
		allocated += st.Blocks * 512
		apparent += st.Size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return allocated, apparent
}
