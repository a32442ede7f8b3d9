package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/e2e"
)

// Power cuts of a whole cluster (T2 of docs/faults.md), through the fault
// build e2e.Main makes: with LOGD_FAULT_POWERCUT, each node journals what
// of its partition logs is durable, and a restart after SIGKILL first cuts
// them back to that (internal/faults). SIGKILL of every node at once, then
// a restart, is then a power cut of the cluster.

var (
	bytesCutRE    = regexp.MustCompile(`power cut of the partition logs.* bytes_cut=(\d+)`)
	walBytesCutRE = regexp.MustCompile(`power cut of the Raft WAL.* bytes_cut=(\d+)`)
)

// bytesCut sums what the power cuts cut from the partition logs
// (bytesCutRE) or the Raft WAL (walBytesCutRE) of every node of c, as their
// logs report it.
func bytesCut(c *e2e.Cluster, re *regexp.Regexp) int64 {
	var sum int64
	for _, nd := range c.Nodes {
		b, err := os.ReadFile(nd.Logs.Name())
		if err != nil {
			c.T.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			sum += n
		}
	}
	return sum
}

// faultSeed is LOGD_FAULT_SEED, or a fresh seed; it is printed so a run's
// schedule (here, the moments of the power cuts, counted in acks) can be
// replayed.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("LOGD_FAULT_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LOGD_FAULT_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from LOGD_FAULT_SEED)", seed)
		return seed
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (LOGD_FAULT_SEED=%d replays it)", seed, seed)
	return seed
}

// errRecorder is a testing.TB whose Errorf records instead of failing: a
// control runs the checker through it, since there the checker must
// complain.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Helper() {}

func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// powerCuts runs a three-node cluster with LOGD_FAULT_POWERCUT=mode under
// six producers and cuts the power of every node cycles times; with
// untilLoss it stops after the first cycle whose check complains. It
// returns what CheckEveryNode's checks complained of and how many bytes
// the cuts dropped.
func powerCuts(t *testing.T, store, mode string, cycles int, untilLoss bool) (complaints []string, cut, walCut int64) {
	t.Setenv("LOGD_FAULT_POWERCUT", mode)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Snapshots every 256 entries let Raft drop entries whose records
	// then live only in the partition logs (synced before each snapshot);
	// small segments roll, and a roll syncs.
	c := e2e.NewCluster(t, 3, "--snapshot-threshold", "256", "--snapshot-interval", "200ms", "--raft-log-store", store)
	const parts = 3
	e2e.CreateTopic(t, ctx, c.Nodes[1], "pc", parts, map[string]string{"segment.bytes": "16384"})
	rng := rand.New(rand.NewPCG(faultSeed(t), 19))
	ps := e2e.NewProducers(5)
	for k := range cycles {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() { defer wg.Done(); ps.Run(ctx, t, c.Nodes[i%3].Listen, "pc", i+10*k, stop) }()
		}
		target, start := ps.AckCount()+200+rng.IntN(400), time.Now()
		// Past the write-back interval of LOGD_FAULT_POWERCUT=nosync, so
		// the membership of the new cluster is on disk and only records
		// can be lost.
		e2e.WaitFor(t, ctx, "acks before the power cut", func() bool {
			return ps.AckCount() >= target && time.Since(start) > time.Second
		})
		c.KillAll() // producers still writing
		close(stop)
		wg.Wait()
		t.Logf("cycle %d: power cut of every node at %d acks in all (%d calls, %d failed or unknown)", k+1, len(ps.Acks), ps.Calls, ps.Failed)
		if untilLoss {
			// The control breaks Raft's durability on purpose: a node may
			// come back without entries (or the vote) it acknowledged, and
			// the cluster may then never agree again, which is itself a
			// loss. A healthy restart converges in seconds: the control
			// does not wait the fsync run's bound for one that does not.
			for _, nd := range c.Nodes {
				nd.Launch("")
			}
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			ok := convergesWithin(cctx, func() bool { return c.Converged(cctx, c.Nodes) })
			ccancel()
			if !ok {
				complaints = append(complaints, fmt.Sprintf("cycle %d: the nodes did not converge under a leader within 30 s of the power cut", k+1))
				break
			}
		} else {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Minute)
			c.RestartAll(cctx)
			c.Converge(cctx)
			ccancel()
		}
		// Every record acknowledged so far, in this cycle or before.
		rec := &errRecorder{TB: t}
		c.CheckEveryNodeTB(ctx, rec, "pc", parts, ps.Acks, ps.Attempted)
		complaints = append(complaints, rec.errs...)
		if untilLoss && len(rec.errs) > 0 {
			break
		}
	}
	return complaints, bytesCut(c, bytesCutRE), bytesCut(c, walBytesCutRE)
}

// convergesWithin polls ok until it holds or ctx ends.
func convergesWithin(ctx context.Context, ok func() bool) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// TestClusterPowerCut is T2 of docs/faults.md: every node of a cluster
// loses the unsynced bytes of its partition logs at once, several times,
// under load; nothing acknowledged may be lost, since Raft's log (fsynced
// before every commit) replays what the partition logs lost. With Raft's
// log in raft-wal, its segment files lose their unsynced writes too
// (internal/faults.WALPowerCut). The control runs the same with Raft's
// log written back without fsync (LOGD_FAULT_POWERCUT=nosync) and must
// lose something: otherwise the power cut or the checker is inert. The
// default run has raft-wal, logd's default; make fault adds raft-boltdb.
func TestClusterPowerCut(t *testing.T) {
	cycles := 3
	stores := []string{"wal"}
	if e2e.FaultLong() {
		cycles = 10
		stores = append(stores, "boltdb")
	}
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			t.Run("fsync", func(t *testing.T) {
				complaints, cut, walCut := powerCuts(t, store, "1", cycles, false)
				for _, e := range complaints {
					t.Error(e)
				}
				if cut == 0 {
					t.Error("the power cuts dropped no byte: the test cut nothing")
				}
				t.Logf("%d power cuts dropped %d bytes of partition logs and %d of the Raft WAL in all", cycles, cut, walCut)
			})
			t.Run("control without fsync", func(t *testing.T) {
				complaints, cut, _ := powerCuts(t, store, "nosync", 3, true)
				if len(complaints) == 0 {
					t.Fatalf("power cuts with Raft's log not fsynced lost nothing (%d bytes of partition logs cut): the power cut or the checker is inert", cut)
				}
				t.Logf("the checker found, as it must without fsync (%d complaints), e.g.: %q", len(complaints), complaints[:min(3, len(complaints))])
			})
		})
	}
}
