package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
	"github.com/logd-dev/logd/replication/transport"
)

// TestJoinLoop: the loop retries failed attempts after the pause, gives each
// attempt its own deadline, stops at the first success with the leader's
// id, and ends with ctx's error when ctx ends during an attempt or a pause.
func TestJoinLoop(t *testing.T) {
	req := backend.JoinRequest{ID: "n2", RaftAddress: "127.0.0.1:7081", APIAddress: "127.0.0.1:7080"}
	errDown := errors.New("connection refused")
	for _, tc := range []struct {
		name string
		// answer gives attempt n's outcome; block waits for the attempt's
		// context to end.
		answer       func(n int) (leader string, err error, block bool)
		cancelAfter  int  // cancel ctx during this attempt (0: never) ...
		inPause      bool // ... or just after it, in the pause that follows
		wantLeader   string
		wantErr      error
		wantAttempts int
		wantWarnings int
	}{
		{name: "first attempt", answer: func(int) (string, error, bool) { return "n1", nil, false },
			wantLeader: "n1", wantAttempts: 1},
		{name: "retries until it succeeds", answer: func(n int) (string, error, bool) {
			if n < 3 {
				return "", errDown, false
			}
			return "n3", nil, false
		}, wantLeader: "n3", wantAttempts: 3, wantWarnings: 2},
		{name: "an attempt past its deadline is retried", answer: func(n int) (string, error, bool) {
			if n == 1 {
				return "", nil, true
			}
			return "n1", nil, false
		}, wantLeader: "n1", wantAttempts: 2, wantWarnings: 1},
		{name: "ends during a pause", answer: func(int) (string, error, bool) { return "", errDown, false },
			cancelAfter: 1, inPause: true, wantErr: context.Canceled, wantAttempts: 1, wantWarnings: 1},
		{name: "ends during an attempt", answer: func(n int) (string, error, bool) { return "", nil, true },
			cancelAfter: 1, wantErr: context.Canceled, wantAttempts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			var mu sync.Mutex
			attempts := 0
			ask := func(actx context.Context, member string, got backend.JoinRequest) (string, error) {
				mu.Lock()
				attempts++
				n := attempts
				mu.Unlock()
				if member != "127.0.0.1:7070" || got != req {
					t.Errorf("attempt %d asked %s for %+v", n, member, got)
				}
				if dl, ok := actx.Deadline(); !ok || time.Until(dl) > 50*time.Millisecond {
					t.Errorf("attempt %d: deadline %v, %v; want one within the attempt timeout", n, dl, ok)
				}
				switch {
				case n == tc.cancelAfter && tc.inPause:
					time.AfterFunc(20*time.Millisecond, cancel)
				case n == tc.cancelAfter:
					cancel()
				}
				leader, err, block := tc.answer(n)
				if block {
					<-actx.Done()
					return "", actx.Err()
				}
				return leader, err
			}
			done := make(chan struct{})
			var leader string
			var err error
			pause := time.Millisecond
			if tc.inPause {
				pause = time.Hour
			}
			go func() {
				defer close(done)
				leader, err = joinLoop(ctx, logger, "127.0.0.1:7070", req, ask, 50*time.Millisecond, pause)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("joinLoop did not return")
			}
			if leader != tc.wantLeader || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("joinLoop = %q, %v; want %q, %v", leader, err, tc.wantLeader, tc.wantErr)
			}
			if attempts != tc.wantAttempts {
				t.Errorf("%d attempts, want %d", attempts, tc.wantAttempts)
			}
			if n := strings.Count(logs.String(), "join failed; retrying"); n != tc.wantWarnings {
				t.Errorf("%d retry warnings, want %d:\n%s", n, tc.wantWarnings, logs.String())
			}
			if joined := strings.Contains(logs.String(), "joined the cluster"); joined != (tc.wantErr == nil) {
				t.Errorf("joined logged %v:\n%s", joined, logs.String())
			}
		})
	}
	if _, err := joinLoop(context.Background(), slog.Default(), "", req, func(context.Context, string, backend.JoinRequest) (string, error) { return "", nil }, time.Second, time.Second); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("no member: %v, want backend.ErrInvalidArgument", err)
	}
	if _, err := joinLoop(context.Background(), slog.Default(), "127.0.0.1:7070", req, nil, time.Second, time.Second); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("no way to ask: %v, want backend.ErrInvalidArgument", err)
	}
}

// TestJoinClusterSendsFeatureLevel: a joining node tells the leader the
// feature level of its build, so the cluster's level can rise once every
// member runs a build that understands a new command.
func TestJoinClusterSendsFeatureLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), APIAdvertise: "127.0.0.1:7070"})
	defer n.Close()
	var got backend.JoinRequest
	leader, err := n.JoinCluster(ctx, "127.0.0.1:7080", func(_ context.Context, _ string, req backend.JoinRequest) (string, error) {
		got = req
		return "n0", nil
	})
	if err != nil || leader != "n0" {
		t.Fatalf("JoinCluster: %q, %v", leader, err)
	}
	if got.ID != "n1" || got.APIAddress != "127.0.0.1:7070" || got.FeatureLevel != backend.FeatureLevel(fsm.Level) {
		t.Fatalf("join request %+v; want n1 at 127.0.0.1:7070 with feature level %d", got, fsm.Level)
	}
}

// joinCluster runs real nodes in this process, Raft over TCP on
// 127.0.0.1, and answers the leader's questions to a node's client API
// (backend.NodeProbe) from that node's own backend.Status, the way server's backend.Status
// handler does. A test can make an API address silent or rewrite what a
// node says.
type joinCluster struct {
	t testing.TB

	mu     sync.Mutex
	byAPI  map[string]*Node
	silent map[string]bool
	// closed are the nodes restart closed, which cleanup leaves alone.
	closed map[*Node]bool
	// rewrite, when set, changes what a node says of itself.
	rewrite func(backend.NodeReport) backend.NodeReport
	probes  int
	// configure, when set, edits each node's configuration before it
	// opens (peer TLS, say).
	configure func(id string, cfg *Config)
}

// testClusterSecret is the cluster secret of the nodes tests join by
// hand (without Config.AskSecret).
var testClusterSecret = bytes.Repeat([]byte{0x5e}, secretLen)

func newJoinCluster(t testing.TB) *joinCluster {
	return &joinCluster{t: t, byAPI: map[string]*Node{}, silent: map[string]bool{}, closed: map[*Node]bool{}}
}

// open starts node id (bootstrapping a cluster of itself, or waiting to
// be joined); its API address is a name only the probe knows.
func (c *joinCluster) open(ctx context.Context, id string, bootstrap bool) *Node {
	c.t.Helper()
	cfg := Config{NodeID: id, DataDir: c.t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: bootstrap,
		APIAdvertise: id + ".api.test:7070", Logger: fsmtest.Logger(), RaftLogLevel: "error",
		// Timeouts above the default: these tests run beside others under
		// -race, where a 150ms lease lost leadership mid-test.
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond, LeaderLeaseTimeout: 500 * time.Millisecond,
		Fatal: func(err error) { c.t.Errorf("%s: fatal: %v", id, err) }, ClusterSecret: testClusterSecret}
	if c.configure != nil {
		c.configure(id, &cfg)
	}
	n := c.start(cfg)
	if bootstrap {
		// A new leader registers its own API address in the log after it
		// is ready; wait for that too, or a test's "membership before"
		// can miss it and see the membership change under it.
		registered := func() bool { api, _ := n.fsm.NodeAddress(id); return api == cfg.APIAdvertise }
		for !n.IsLeader() || !n.Ready() || !registered() {
			select {
			case <-ctx.Done():
				c.t.Fatalf("%s does not lead", id)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return n
}

// start opens a node of the cluster with cfg, closed at the test's end
// unless restart closed it.
func (c *joinCluster) start(cfg Config) *Node {
	c.t.Helper()
	n, err := Open(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		c.mu.Lock()
		closed := c.closed[n]
		c.mu.Unlock()
		if !closed {
			c.close(n)
		}
	})
	c.mu.Lock()
	c.byAPI[cfg.APIAdvertise] = n
	c.mu.Unlock()
	return n
}

// close closes n and the streams of its transport.
func (c *joinCluster) close(n *Node) {
	c.t.Helper()
	if err := n.Close(); err != nil {
		c.t.Errorf("close %s: %v", n.NodeID(), err)
	}
	// Raft's transport keeps its pooled connections to peers open after
	// Close, and each holds a reading goroutine of the peer's transport
	// in this process.
	n.stores.transport.(*raft.NetworkTransport).CloseStreams()
}

// restart closes n and opens it again on its data dir and Raft address,
// with its configuration as edit changes it (a new build, say), and
// returns the new node, which answers at n's API address from then on.
func (c *joinCluster) restart(n *Node, edit func(*Config)) *Node {
	c.t.Helper()
	cfg := c.stop(n)
	if edit != nil {
		edit(&cfg)
	}
	return c.start(cfg)
}

// stop closes n for good and returns the configuration that opens it
// again (start) on its data dir and Raft address.
func (c *joinCluster) stop(n *Node) Config {
	c.t.Helper()
	cfg := n.cfg
	cfg.RaftBind, cfg.RaftAdvertise, cfg.Bootstrap = string(n.stores.transport.LocalAddr()), "", false
	c.mu.Lock()
	c.closed[n] = true
	c.mu.Unlock()
	c.close(n)
	return cfg
}

// probe is the backend.NodeProbe of the tests.
func (c *joinCluster) probe(ctx context.Context, addr string) (backend.NodeReport, error) {
	c.mu.Lock()
	c.probes++
	n, silent, rewrite := c.byAPI[addr], c.silent[addr], c.rewrite
	c.mu.Unlock()
	if n == nil || silent {
		return backend.NodeReport{}, fmt.Errorf("dial %s: connection refused", addr)
	}
	st := n.Status()
	rep := backend.NodeReport{ID: st.NodeID, Ready: n.Ready(), AppliedIndex: st.AppliedIndex, LeaderID: st.LeaderID, Term: st.Term}
	if rewrite != nil {
		rep = rewrite(rep)
	}
	return rep, nil
}

func (c *joinCluster) setSilent(n *Node, silent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.silent[n.cfg.APIAdvertise] = silent
}

func (c *joinCluster) setRewrite(f func(backend.NodeReport) backend.NodeReport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rewrite = f
}

func (c *joinCluster) probeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probes
}

// joinRequest is what n's JoinCluster would send.
func joinRequest(n *Node) backend.JoinRequest {
	return backend.JoinRequest{ID: n.cfg.NodeID, RaftAddress: string(n.stores.transport.LocalAddr()), APIAddress: n.cfg.APIAdvertise, FeatureLevel: backend.FeatureLevel(n.buildLevel())}
}

// membership is the leader's configuration as "id=suffrage" in order,
// with the registry's API addresses, for comparing before and after.
func membership(t *testing.T, n *Node) string {
	t.Helper()
	var parts []string
	for _, m := range n.Status().Members {
		api, _ := n.fsm.NodeAddress(m.ID)
		parts = append(parts, m.ID+"="+m.Suffrage+"@"+m.Address+"/"+api)
	}
	for _, r := range n.fsm.Nodes() {
		if m, _ := n.member(r.ID); m == nil {
			parts = append(parts, "registered:"+r.ID+"/"+r.APIAddress)
		}
	}
	return strings.Join(parts, " ")
}

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestJoinRefusesBadRequests: a join whose id or addresses are malformed,
// empty or undialable is refused with backend.ErrInvalidArgument before the node
// is asked anything, and the membership stays as it was.
func TestJoinRefusesBadRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	l := c.open(ctx, "n1", true)
	before := membership(t, l)
	good := backend.JoinRequest{ID: "n9", RaftAddress: "127.0.0.1:7091", APIAddress: "127.0.0.1:7090"}
	for _, tc := range []struct {
		name string
		edit func(*backend.JoinRequest)
	}{
		{name: "no id", edit: func(r *backend.JoinRequest) { r.ID = "" }},
		{name: "id with a space", edit: func(r *backend.JoinRequest) { r.ID = "n 9" }},
		{name: "id with a newline", edit: func(r *backend.JoinRequest) { r.ID = "n9\n" }},
		{name: "long id", edit: func(r *backend.JoinRequest) { r.ID = strings.Repeat("n", 129) }},
		{name: "no API address", edit: func(r *backend.JoinRequest) { r.APIAddress = "" }},
		{name: "no raft address", edit: func(r *backend.JoinRequest) { r.RaftAddress = "" }},
		{name: "API address without a port", edit: func(r *backend.JoinRequest) { r.APIAddress = "127.0.0.1" }},
		{name: "API address without a host", edit: func(r *backend.JoinRequest) { r.APIAddress = ":7090" }},
		{name: "raft address on any interface", edit: func(r *backend.JoinRequest) { r.RaftAddress = "0.0.0.0:7091" }},
		{name: "raft address on any IPv6 interface", edit: func(r *backend.JoinRequest) { r.RaftAddress = "[::]:7091" }},
		{name: "port 0", edit: func(r *backend.JoinRequest) { r.RaftAddress = "127.0.0.1:0" }},
		{name: "port out of range", edit: func(r *backend.JoinRequest) { r.APIAddress = "127.0.0.1:70000" }},
		{name: "named port", edit: func(r *backend.JoinRequest) { r.APIAddress = "127.0.0.1:http" }},
		{name: "a URL", edit: func(r *backend.JoinRequest) { r.APIAddress = "http://127.0.0.1:7090" }},
		{name: "host with a space", edit: func(r *backend.JoinRequest) { r.APIAddress = "bad host:7090" }},
		{name: "long address", edit: func(r *backend.JoinRequest) { r.APIAddress = strings.Repeat("a.", 140) + "b:7090" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := good
			tc.edit(&req)
			if err := l.Join(ctx, req, c.probe); !errors.Is(err, backend.ErrInvalidArgument) {
				t.Fatalf("Join(%+v) = %v, want backend.ErrInvalidArgument", req, err)
			}
		})
	}
	if err := l.Join(ctx, good, nil); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Join without a probe = %v, want backend.ErrInvalidArgument", err)
	}
	if n := c.probeCount(); n != 0 {
		t.Errorf("%d probes for malformed requests, want none", n)
	}
	if after := membership(t, l); after != before {
		t.Errorf("membership changed:\nbefore %s\nafter  %s", before, after)
	}
}

// TestJoinChecksTheNode: a joining node that does not answer on its API
// address, answers there as another node, or whose Raft address refuses
// connections is refused (backend.ErrNodeUnreachable); an address of another
// member is refused (backend.ErrNodeConflict). None changes the membership. A
// real node then joins and is a voter; joining it again changes nothing;
// its id at another Raft address is a conflict.
func TestJoinChecksTheNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	l := c.open(ctx, "n1", true)
	j := c.open(ctx, "n2", false)
	before := membership(t, l)
	for _, tc := range []struct {
		name string
		edit func(*backend.JoinRequest)
		want error
	}{
		{name: "API address silent", edit: func(r *backend.JoinRequest) { r.APIAddress = "nobody.api.test:7070" }, want: backend.ErrNodeUnreachable},
		{name: "API address answers as another node", edit: func(r *backend.JoinRequest) { r.ID = "n3" }, want: backend.ErrNodeUnreachable},
		{name: "raft address refuses connections", edit: func(r *backend.JoinRequest) { r.RaftAddress = closedAddr(t) }, want: backend.ErrNodeUnreachable},
		{name: "raft address of a member", edit: func(r *backend.JoinRequest) { r.RaftAddress = string(l.stores.transport.LocalAddr()) }, want: backend.ErrNodeConflict},
		{name: "API address of a member", edit: func(r *backend.JoinRequest) { r.ID, r.APIAddress = "n3", l.cfg.APIAdvertise }, want: backend.ErrNodeConflict},
		{name: "the leader's id at another raft address", edit: func(r *backend.JoinRequest) { r.ID = "n1" }, want: backend.ErrNodeConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := joinRequest(j)
			tc.edit(&req)
			if err := l.Join(ctx, req, c.probe); !errors.Is(err, tc.want) {
				t.Fatalf("Join(%+v) = %v, want %v", req, err, tc.want)
			}
			if after := membership(t, l); after != before {
				t.Fatalf("membership changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	if err := l.Join(ctx, joinRequest(j), c.probe); err != nil {
		t.Fatalf("join n2: %v", err)
	}
	if m, _ := l.member("n2"); m == nil || m.Suffrage != raft.Voter {
		t.Fatalf("n2 after its join: %+v, want a voter", m)
	}
	joined := membership(t, l)
	idx := l.raft.GetConfiguration().Index()
	if err := l.Join(ctx, joinRequest(j), c.probe); err != nil {
		t.Fatalf("join n2 again: %v", err)
	}
	if l.raft.GetConfiguration().Index() != idx || membership(t, l) != joined {
		t.Errorf("joining again changed the membership: %s", membership(t, l))
	}
	moved := joinRequest(j)
	moved.RaftAddress = closedAddr(t)
	if err := l.Join(ctx, moved, c.probe); !errors.Is(err, backend.ErrNodeConflict) {
		t.Errorf("n2 at another raft address: %v, want backend.ErrNodeConflict", err)
	}
	// Its API address moves only once the old one stops answering as n2.
	c.mu.Lock()
	c.byAPI["n2-moved.api.test:7070"] = j
	c.mu.Unlock()
	newAPI := joinRequest(j)
	newAPI.APIAddress = "n2-moved.api.test:7070"
	if err := l.Join(ctx, newAPI, c.probe); !errors.Is(err, backend.ErrNodeConflict) {
		t.Errorf("n2 at another API address while the old one answers: %v, want backend.ErrNodeConflict", err)
	}
	if after := membership(t, l); after != joined {
		t.Errorf("membership changed:\nbefore %s\nafter  %s", joined, after)
	}
	c.setSilent(j, true)
	if err := l.Join(ctx, newAPI, c.probe); err != nil {
		t.Errorf("n2 at another API address once the old one is silent: %v", err)
	}
	if api, _ := l.fsm.NodeAddress("n2"); api != newAPI.APIAddress {
		t.Errorf("n2's API address %q, want %q", api, newAPI.APIAddress)
	}
}

// TestJoinPromotesOnlyCaughtUp: a joining node that does not catch up (it
// says it applied nothing) stays a non-voter when the wait ends. While it
// waits, another join or a removal of another node is refused with
// backend.ErrMembershipChange; removing the waiting node ends its join and takes it
// out. Once it reports its real progress it joins as a voter.
func TestJoinPromotesOnlyCaughtUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	l := c.open(ctx, "n1", true)
	if _, err := NewBackend(l).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// More entries than a non-voter may lag behind.
	for i := range joinMaxLag + 10 {
		if _, err := NewBackend(l).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, fmt.Sprint(i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	j := c.open(ctx, "n2", false)
	other := c.open(ctx, "n3", false)
	c.setRewrite(func(r backend.NodeReport) backend.NodeReport {
		if r.ID == "n2" {
			r.AppliedIndex = 0
		}
		return r
	})

	// A wait that ends leaves a non-voter.
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	err := l.Join(wctx, joinRequest(j), c.probe)
	wcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("join of a node that does not catch up: %v, want a deadline", err)
	}
	if m, _ := l.member("n2"); m == nil || m.Suffrage != raft.Nonvoter {
		t.Fatalf("n2 after a wait that ended: %+v, want a non-voter", m)
	}

	// While it waits again, other changes are refused.
	joinErr := make(chan error, 1)
	go func() { joinErr <- l.Join(ctx, joinRequest(j), c.probe) }()
	waitCond(t, ctx, "the join waits", func() bool {
		l.cluster.mu.Lock()
		defer l.cluster.mu.Unlock()
		return l.cluster.change != nil
	})
	if err := l.Join(ctx, joinRequest(other), c.probe); !errors.Is(err, backend.ErrMembershipChange) {
		t.Errorf("a second join while one waits: %v, want backend.ErrMembershipChange", err)
	}
	if err := l.RemoveNode(ctx, "n3"); !errors.Is(err, backend.ErrMembershipChange) {
		t.Errorf("a removal of another node while a join waits: %v, want backend.ErrMembershipChange", err)
	}
	if err := l.RemoveNode(ctx, "n2"); err != nil {
		t.Fatalf("remove the waiting node: %v", err)
	}
	select {
	case err := <-joinErr:
		if err == nil {
			t.Fatal("the removed node's join succeeded")
		}
	case <-ctx.Done():
		t.Fatal("the removed node's join did not end")
	}
	if m, _ := l.member("n2"); m != nil {
		t.Fatalf("n2 after its removal: %+v", m)
	}

	// A node that catches up is promoted.
	c.setRewrite(nil)
	if err := l.Join(ctx, joinRequest(other), c.probe); err != nil {
		t.Fatalf("join n3: %v", err)
	}
	if m, _ := l.member("n3"); m == nil || m.Suffrage != raft.Voter {
		t.Fatalf("n3: %+v, want a voter", m)
	}
}

// TestJoinAsksRaftToo: a joining node whose client API says it is caught
// up, follows this leader and is ready, but whose Raft address is not a
// Raft server holding the log (a port that accepts connections and closes
// them), is never promoted: the leader's heartbeat to that address is its
// own check. It stays a non-voter.
func TestJoinAsksRaftToo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	l := c.open(ctx, "n1", true)
	j := c.open(ctx, "n2", false)
	// A Raft port that proves to be n2 and serves no Raft group.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := transport.NewPort(ln, nil, nil, "n2", 16, fsmtest.Logger())
	port.SetSecret(testClusterSecret, true)
	port.Start()
	defer port.Close()
	c.setRewrite(func(r backend.NodeReport) backend.NodeReport {
		if r.ID == "n2" {
			r.Ready, r.AppliedIndex, r.LeaderID, r.Term = true, l.raft.CommitIndex(), "n1", l.raft.CurrentTerm()
		}
		return r
	})
	req := joinRequest(j)
	req.RaftAddress = ln.Addr().String()
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	err = l.Join(wctx, req, c.probe)
	wcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("join of a node whose raft address is no raft server: %v, want a deadline", err)
	}
	if m, _ := l.member("n2"); m == nil || m.Suffrage != raft.Nonvoter {
		t.Fatalf("n2: %+v, want a non-voter", m)
	}
}

// TestJoinRefusesWithoutReachableQuorum: with two of three voters silent,
// promoting a fourth node would make a configuration of four voters of
// which two answer; it is refused (backend.ErrNoQuorum) and the node stays a
// non-voter. Once one voter answers again, the same join promotes it.
func TestJoinRefusesWithoutReachableQuorum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	l := c.open(ctx, "n1", true)
	n2, n3 := c.open(ctx, "n2", false), c.open(ctx, "n3", false)
	for _, n := range []*Node{n2, n3} {
		if err := l.Join(ctx, joinRequest(n), c.probe); err != nil {
			t.Fatalf("join %s: %v", n.cfg.NodeID, err)
		}
	}
	n4 := c.open(ctx, "n4", false)
	c.setSilent(n2, true)
	c.setSilent(n3, true)
	if err := l.Join(ctx, joinRequest(n4), c.probe); !errors.Is(err, backend.ErrNoQuorum) {
		t.Fatalf("join n4 with two of three voters silent: %v, want backend.ErrNoQuorum", err)
	}
	if m, _ := l.member("n4"); m == nil || m.Suffrage != raft.Nonvoter {
		t.Fatalf("n4 after a refused promotion: %+v, want a non-voter", m)
	}
	c.setSilent(n3, false)
	if err := l.Join(ctx, joinRequest(n4), c.probe); err != nil {
		t.Fatalf("join n4 with one voter silent: %v", err)
	}
	if m, _ := l.member("n4"); m == nil || m.Suffrage != raft.Voter {
		t.Fatalf("n4: %+v, want a voter", m)
	}
}

// waitCond polls cond every 5 ms until it holds or ctx ends.
func waitCond(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
