package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
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
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// Cluster end-to-end tests: three real logd processes on 127.0.0.1.

// TestClusterLeaderKill is T1 of docs/faults.md on a cluster: eight producers write
// through different nodes while the leader is SIGKILLed at random moments
// and restarted; every acknowledged record is then read back from every
// node.
func TestClusterLeaderKill(t *testing.T) {
	e2e.ParallelShort(t)
	kills, between := 3, 150
	if e2e.FaultLong() {
		kills, between = 10, 2000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--snapshot-threshold", "256", "--snapshot-interval", "200ms")
	const parts = 3
	e2e.CreateTopic(t, ctx, c.Nodes[1], "t1", parts, nil) // forwarded to the leader
	ps := e2e.NewProducers(5)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.Run(ctx, t, c.Nodes[i%3].Listen, "t1", i, stop) }()
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	for k := range kills {
		target := ps.AckCount() + between/2 + rng.IntN(between)
		e2e.WaitFor(t, ctx, "acks before a kill", func() bool { return ps.AckCount() >= target })
		l := c.Leader(ctx)
		l.Kill()
		t.Logf("kill %d: SIGKILLed leader %s at %d acks", k+1, l.ID, ps.AckCount())
		ps.WaitAcks(t, ctx, "acks after a kill", between/2)
		l.Launch(c.Nodes[(slices.Index(c.Nodes, l)+1)%3].Listen)
	}
	ps.WaitAcks(t, ctx, "final acks", between)
	close(stop)
	wg.Wait()
	c.Converge(ctx)
	c.CheckEveryNode(ctx, "t1", parts, ps.Acks, ps.Attempted)
	t.Logf("%d calls (%d failed or unknown), %d records acknowledged, %d kills", ps.Calls, ps.Failed, len(ps.Acks), kills)
}

// segmentSums returns relative path -> SHA-256 of every segment data and
// .meta file under a node's topics directory.
func segmentSums(t *testing.T, dataDir string) map[string][32]byte {
	t.Helper()
	root := filepath.Join(dataDir, "topics")
	out := map[string][32]byte{}
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".log") || strings.HasSuffix(p, ".meta") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[rel] = sha256.Sum256(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClusterSnapshotCatchUp stops a follower while more than Raft's
// trailing logs (512) are written, so it can only catch up by installing a
// snapshot and fetching segment bytes from a peer; it is killed twice early
// in that install. Afterwards every node holds byte-identical segments.
func TestClusterSnapshotCatchUp(t *testing.T) {
	e2e.ParallelShort(t)
	calls := 700
	if e2e.FaultLong() {
		calls = 5000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The meta group's catch-up: its partitions' appends drive its
	// snapshots (TestClusterDataGroupsKillAndCatchUp is a data group's).
	c := e2e.NewCluster(t, 3, append(e2e.MetaGroupOnly(), "--snapshot-threshold", "128", "--snapshot-interval", "100ms")...)
	const parts = 2
	e2e.CreateTopic(t, ctx, c.Nodes[0], "s", parts, map[string]string{"segment.bytes": "8192"})
	lagging := c.Nodes[2]
	if l := c.Leader(ctx); l == lagging {
		lagging = c.Nodes[1]
	}
	attempted := map[string]bool{}
	var acks []e2e.Ack
	var mu sync.Mutex
	// One call at a time: each is its own Raft entry (calls in flight
	// together may share one: docs/architecture.md, "Coalesced appends"),
	// so the lagging node misses more entries than Raft keeps.
	const writers = 1
	produce := func(from, to int) {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + w; i < to; i += writers {
					v := fmt.Sprintf("s-%d", i)
					mu.Lock()
					attempted[v] = true
					mu.Unlock()
					nd := c.Nodes[i%3]
					if nd == lagging || nd.Cmd == nil {
						nd = c.Nodes[(i+1)%3]
						if nd == lagging {
							nd = c.Nodes[(i+2)%3]
						}
					}
					resp, err := nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "s", Records: []*logdv1.Record{{Key: []byte(v), Value: []byte(v)}}}))
					if err != nil {
						continue
					}
					mu.Lock()
					acks = append(acks, e2e.Ack{Partition: resp.Msg.Results[0].Partition, Offset: resp.Msg.Results[0].Offset, Value: v})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	produce(0, 50)
	lagging.Kill()
	produce(50, 50+calls)
	// Killed twice during its catch-up, then left to finish.
	for _, d := range []time.Duration{300 * time.Millisecond, 800 * time.Millisecond} {
		lagging.Launch("")
		time.Sleep(d) // a random moment of the install; the process is real
		lagging.Kill()
	}
	lagging.Launch("")
	c.Converge(ctx)
	c.CheckEveryNode(ctx, "s", parts, acks, attempted)
	logs, _ := os.ReadFile(lagging.Logs.Name())
	if !strings.Contains(string(logs), "snapshot catch-up") {
		t.Errorf("%s caught up without installing a snapshot; the test did not exercise catch-up", lagging.ID)
	}
	want := segmentSums(t, c.Nodes[0].DataDir)
	for _, nd := range c.Nodes[1:] {
		got := segmentSums(t, nd.DataDir)
		if fmt.Sprint(sortedNames(got)) != fmt.Sprint(sortedNames(want)) {
			t.Fatalf("%s has files %v, %s has %v", nd.ID, sortedNames(got), c.Nodes[0].ID, sortedNames(want))
		}
		for name, sum := range want {
			if got[name] != sum {
				t.Errorf("%s: %s differs from %s's", nd.ID, name, c.Nodes[0].ID)
			}
		}
	}
	t.Logf("%d segment files identical on 3 nodes; %d records acknowledged", len(want), len(acks))
}

func sortedNames(m map[string][32]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestClusterMinorityNeverAcks pauses (SIGSTOP) both followers, so the
// leader is a minority of one: no write through it may be acknowledged.
// Then the majority side is the paused leader: the others elect a new
// leader, and the old one, resumed, acknowledges nothing it did not commit.
func TestClusterMinorityNeverAcks(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3)
	e2e.CreateTopic(t, ctx, c.Nodes[0], "m", 1, nil)
	attempted := map[string]bool{}
	var acks []e2e.Ack
	produce := func(nd *e2e.Node, v string, timeout time.Duration) error {
		attempted[v] = true
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		resp, err := nd.RPC.Produce(cctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "m", Records: []*logdv1.Record{{Value: []byte(v)}}}))
		if err == nil {
			acks = append(acks, e2e.Ack{Partition: resp.Msg.Results[0].Partition, Offset: resp.Msg.Results[0].Offset, Value: v})
		}
		return err
	}
	l := c.Leader(ctx)
	if err := produce(l, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The data group that holds m/0 (0: the meta group): its leader must
	// be one of the majority too before their writes can land.
	var group uint64
	if d, err := l.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "m"})); err == nil && len(d.Msg.Partitions) == 1 {
		group = d.Msg.Partitions[0].DataGroup
	} else {
		t.Fatalf("describe m: %v", err)
	}
	var followers []*e2e.Node
	for _, nd := range c.Nodes {
		if nd != l {
			followers = append(followers, nd)
			nd.Signal(syscall.SIGSTOP)
		}
	}
	for i := range 5 {
		if err := produce(l, fmt.Sprintf("minority-%d", i), 700*time.Millisecond); err == nil {
			t.Errorf("write %d acknowledged by a leader without a quorum", i)
		}
	}
	// Now the old leader is the one cut off.
	l.Signal(syscall.SIGSTOP)
	for _, nd := range followers {
		nd.Signal(syscall.SIGCONT)
	}
	// Both of the majority must know the new leader, and the leader must
	// serve, before writes through either are sure to land: the other one
	// may still be a candidate that knows no leader. The same for the
	// data group of m/0.
	e2e.WaitFor(t, ctx, "a new leader known to the majority", func() bool {
		leaders := map[string]bool{}
		for _, nd := range followers {
			st, err := nd.Status(ctx)
			if err != nil || st.LeaderId == "" || st.LeaderId == l.ID {
				return false
			}
			leaders[st.LeaderId] = true
			if st.State == "Leader" && !st.Ready {
				return false
			}
			if group != 0 && !slices.ContainsFunc(st.DataGroups, func(g *logdv1.DataGroupStatus) bool {
				return g.Id == group && g.LeaderId != "" && g.LeaderId != l.ID
			}) {
				return false
			}
		}
		return len(leaders) == 1
	})
	for i := range 5 {
		if err := produce(followers[i%2], fmt.Sprintf("majority-%d", i), 5*time.Second); err != nil {
			t.Fatalf("majority write %d: %v", i, err)
		}
	}
	l.Signal(syscall.SIGCONT)
	for i := range 5 {
		produce(l, fmt.Sprintf("rejoined-%d", i), 3*time.Second) // forwarded, or refused while it steps down
	}
	c.Converge(ctx)
	c.CheckEveryNode(ctx, "m", 1, acks, attempted)
	t.Logf("%d writes acknowledged", len(acks))
}

// TestClusterFailoverTime measures, over 20 leader kills, the time from
// SIGKILL of the leader to the first write acknowledged through a client
// that was talking to it, and splits each failover into its phases from
// the survivors' logs. Long runs only (make fault); it reports figures and
// asserts none (a shared machine's timings are noise).
func TestClusterFailoverTime(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("LOGD_FAULT_LONG=1 (make fault) measures failover")
	}
	const kills = 20
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3)
	e2e.CreateTopic(t, ctx, c.Nodes[0], "f", 1, nil)
	var samples []failoverSample
	for k := range kills {
		l := c.Leader(ctx)
		// One attempt per call: the loop below retries every 10 ms, so the
		// figure is the cluster's, not a retry policy's backoff.
		cl, err := client.New(l.Listen, client.Options{Timeout: 2 * time.Second,
			Retry: client.RetryPolicy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		// A client with the default options makes one call, riding out the
		// failover with its own retries: what an application sees.
		plain, err := client.New(l.Listen, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []*client.Client{cl, plain} {
			if _, err := c.Produce(ctx, "f", []client.Record{{Value: []byte("warm")}}); err != nil {
				t.Fatal(err) // also teaches the client the members
			}
		}
		var survivors []*e2e.Node
		for _, nd := range c.Nodes {
			if nd != l {
				survivors = append(survivors, nd)
			}
		}
		l.Kill()
		start := time.Now()
		plainDone := make(chan struct{})
		var plainTook time.Duration
		var plainErr error
		go func() {
			defer close(plainDone)
			_, plainErr = plain.Produce(ctx, "f", []client.Record{{Value: []byte(fmt.Sprintf("p%d", k))}})
			plainTook = time.Since(start)
		}()
		attempts := 0
		for {
			attempts++
			if _, err := cl.Produce(ctx, "f", []client.Record{{Value: []byte(fmt.Sprintf("k%d", k))}}); err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("failover %d: no write acknowledged: %v", k+1, ctx.Err())
			}
			time.Sleep(10 * time.Millisecond)
		}
		s := readFailover(t, start, time.Since(start), survivors)
		s.attempts = attempts
		<-plainDone
		s.plain = plainTook
		if plainErr != nil {
			s.plain = -1
			t.Logf("failover %2d: the default client's call failed after %v: %v", k+1, plainTook, plainErr)
		}
		t.Logf("failover %2d: %s", k+1, s)
		samples = append(samples, s)
		cl.Close()
		plain.Close()
		l.Launch(survivors[0].Listen)
		c.Converge(ctx)
	}
	phase := func(name string, get func(failoverSample) time.Duration) {
		var ds []time.Duration
		for _, s := range samples {
			if d := get(s); d >= 0 {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			t.Logf("  %-34s not found in the logs", name)
			return
		}
		slices.Sort(ds)
		t.Logf("  %-34s median %4dms  max %4dms  (%d samples)", name, ds[len(ds)/2].Milliseconds(), ds[len(ds)-1].Milliseconds(), len(ds))
	}
	t.Logf("failover phases, from the leader's SIGKILL, %d kills:", kills)
	phase("a follower times out", func(s failoverSample) time.Duration { return s.detect })
	phase("both followers timed out", func(s failoverSample) time.Duration { return s.bothDetect })
	phase("new leader elected", func(s failoverSample) time.Duration { return s.elected })
	phase("its barrier applied (serves)", func(s failoverSample) time.Duration { return s.ready })
	phase("first write acknowledged", func(s failoverSample) time.Duration { return s.acked })
	phase("default client's call acknowledged", func(s failoverSample) time.Duration { return s.plain })
	var acked []time.Duration
	for _, s := range samples {
		acked = append(acked, s.acked)
	}
	slices.Sort(acked)
	t.Logf("failover (leader SIGKILL -> first acknowledged write), %d kills: median %v max %v (goal: median < 1s, max < 1.5s)",
		kills, acked[len(acked)/2].Round(time.Millisecond), acked[len(acked)-1].Round(time.Millisecond))
}

// failoverSample is one failover: each phase's end as an offset from the
// leader's SIGKILL, -1 when its log line was not found.
type failoverSample struct {
	// detect is when the first survivor's Raft gave up on the leader;
	// bothDetect when the second did too (each refuses to vote while it
	// still knows a leader, so an election needs both).
	detect, bothDetect time.Duration
	// elected is when a survivor won the election; ready when it had
	// applied the barrier of its term, so it serves.
	elected, ready time.Duration
	// acked is when the client's write was acknowledged; attempts how many
	// calls it took.
	acked    time.Duration
	attempts int
	// plain is when a client with the default options, whose one call
	// began at the kill, was acknowledged (-1: the call failed).
	plain time.Duration
}

func (s failoverSample) String() string {
	ms := func(d time.Duration) string {
		if d < 0 {
			return "?"
		}
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("timeout %s, both %s, elected %s, serving %s, acked %s (%d calls); default client %s",
		ms(s.detect), ms(s.bothDetect), ms(s.elected), ms(s.ready), ms(s.acked), s.attempts, ms(s.plain))
}

// readFailover reads the phases of the failover that began at kill from
// the survivors' logs (lines stamped from kill on).
func readFailover(t *testing.T, kill time.Time, acked time.Duration, survivors []*e2e.Node) failoverSample {
	t.Helper()
	s := failoverSample{detect: -1, bothDetect: -1, elected: -1, ready: -1, acked: acked, plain: -1}
	first := func(cur, d time.Duration) time.Duration {
		if cur < 0 || d < cur {
			return d
		}
		return cur
	}
	timedOut := 0
	for _, nd := range survivors {
		b, err := os.ReadFile(nd.Logs.Name())
		if err != nil {
			t.Fatal(err)
		}
		detect := time.Duration(-1)
		for _, line := range strings.Split(string(b), "\n") {
			at, ok := logTime(line)
			if !ok || at.Before(kill) {
				continue
			}
			d := at.Sub(kill)
			switch {
			case strings.Contains(line, "heartbeat timeout reached"):
				detect = first(detect, d)
			case strings.Contains(line, "won the election"):
				s.elected = first(s.elected, d)
			case strings.Contains(line, "leader barrier applied"):
				s.ready = first(s.ready, d)
			}
		}
		if detect >= 0 {
			timedOut++
			s.detect = first(s.detect, detect)
			s.bothDetect = max(s.bothDetect, detect)
		}
	}
	if timedOut < len(survivors) {
		s.bothDetect = -1
	}
	return s
}

// logTime reads the time stamp of a node's log line: logd's own lines
// (slog text, hashicorp/raft's included) carry time=...; older builds'
// Raft lines (hclog) started with it.
func logTime(line string) (time.Time, bool) {
	if rest, ok := strings.CutPrefix(line, "time="); ok {
		stamp, _, _ := strings.Cut(rest, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		return at, err == nil
	}
	stamp, _, _ := strings.Cut(line, " ")
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", stamp)
	return at, err == nil
}

// TestClusterElectionsUnderLoad counts Raft elections while logctl bench
// produce saturates a 3-node cluster for a minute (long runs only). No node
// is killed or paused, so every election is spurious: a follower that
// missed heartbeats, or a leader that lost its lease, under load alone. It
// reports figures and asserts none.
func TestClusterElectionsUnderLoad(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("LOGD_FAULT_LONG=1 (make fault) counts elections under load")
	}
	const run = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), run+3*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3)
	l := c.Leader(ctx)
	logctlPath := e2e.LogctlBinary(t)
	terms := func() (maxTerm uint64, leader string) {
		for _, nd := range c.Nodes {
			if st, err := nd.Status(ctx); err == nil && st.Term >= maxTerm {
				maxTerm = st.Term
				if st.LeaderId != "" {
					leader = st.LeaderId
				}
			}
		}
		return maxTerm, leader
	}
	term0, leader := terms()
	leaders := []string{leader}
	// Two benches, one through the leader and one through a follower (which
	// forwards), so every node is busy. A bench stops at its first failed
	// call; each is restarted until the minute is over, so the load never
	// pauses for long.
	follower := c.Nodes[0]
	if follower == l {
		follower = c.Nodes[1]
	}
	var (
		benches                  sync.WaitGroup
		benchMu                  sync.Mutex
		benchRuns, benchFailures int
		benchOut                 []string
	)
	end := time.Now().Add(run)
	for _, nd := range []*e2e.Node{l, follower} {
		benches.Add(1)
		go func() {
			defer benches.Done()
			for left := time.Until(end); left > time.Second && ctx.Err() == nil; left = time.Until(end) {
				cmd := exec.CommandContext(ctx, logctlPath, "--server", nd.Listen, "bench", "produce", "--topic", "load", "--keep",
					"--duration", left.Round(time.Second).String(), "--concurrency", "8", "--records-per-call", "500")
				out, err := cmd.CombinedOutput()
				benchMu.Lock()
				benchRuns++
				benchOut = append(benchOut, fmt.Sprintf("through %s:\n%s", nd.ID, e2e.Tail(string(out), 400)))
				if err != nil {
					benchFailures++
				}
				benchMu.Unlock()
				if err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	benchDone := make(chan struct{})
	go func() { benches.Wait(); close(benchDone) }()
	start := time.Now()
	for done := false; !done; {
		select {
		case <-benchDone:
			done = true
		case <-time.After(100 * time.Millisecond):
		}
		if _, ld := terms(); ld != "" && ld != leaders[len(leaders)-1] {
			leaders = append(leaders, ld)
		}
	}
	elapsed := time.Since(start)
	term1, _ := terms()
	timeouts := 0
	for _, nd := range c.Nodes {
		b, _ := os.ReadFile(nd.Logs.Name())
		for _, line := range strings.Split(string(b), "\n") {
			if at, ok := logTime(line); ok && !at.Before(start) && strings.Contains(line, "heartbeat timeout reached") {
				timeouts++
			}
		}
	}
	elections := term1 - term0
	t.Logf("saturating produce for %v (%d bench runs, %d ended by an error); last runs:\n%s", elapsed.Round(time.Second), benchRuns, benchFailures,
		strings.Join(benchOut[max(0, len(benchOut)-2):], "\n"))
	t.Logf("elections under load without faults: %d (term %d -> %d; %d heartbeat timeouts; leaders %v) = %.0f per hour (goal: 0)",
		elections, term0, term1, timeouts, leaders, float64(elections)*float64(time.Hour)/float64(elapsed))
}
