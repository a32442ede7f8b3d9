package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/e2e"
)

// produceCall is one run of logctl produce with an idempotency key.
type produceCall struct {
	value      string
	code       int
	stdout     string
	stderr     string
	start, end time.Time
}

// TestClientKeyedProduceAcrossLeaderKill runs logctl produce with
// idempotency keys and the default retry policy, in a loop through each
// follower of a three-node cluster, while the leader is SIGKILLed. A call
// that was in flight then sees a lost reply, a refused connection and
// NOT_LEADER answers until a new leader serves. Each call must ride out
// the election and succeed, its record then in the log once at the offset
// it printed, or exit 5 (outcome unknown) with its record in the log at
// most once. None may give up as retryable (4) or fail as if nothing had
// been written (1).
func TestClientKeyedProduceAcrossLeaderKill(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := e2e.LogctlBinary(t)
	c := e2e.NewCluster(t, 3)
	e2e.CreateTopic(t, ctx, c.Nodes[0], "pay", 1, nil)
	l := c.Leader(ctx)
	var survivors []*e2e.Node
	for _, nd := range c.Nodes {
		if nd != l {
			survivors = append(survivors, nd)
		}
	}

	var (
		mu    sync.Mutex
		calls []produceCall
	)
	// lastStart[w] is when writer w's last finished call started.
	lastStart := make([]time.Time, 2*len(survivors))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range lastStart {
		nd := survivors[w%len(survivors)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, n)
				cmd := exec.CommandContext(ctx, bin, "--server", nd.Listen, "produce", "pay", v, "--idempotency-key", v, "-o", "json")
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				pc := produceCall{value: v, start: time.Now()}
				err := cmd.Run()
				pc.end = time.Now()
				var ee *exec.ExitError
				switch {
				case err == nil:
				case errors.As(err, &ee):
					pc.code = ee.ExitCode()
				default:
					t.Errorf("run logctl: %v", err)
					return
				}
				pc.stdout, pc.stderr = stdout.String(), stderr.String()
				mu.Lock()
				calls = append(calls, pc)
				lastStart[w] = pc.start
				mu.Unlock()
			}
		}()
	}
	// Kill the leader once every writer has written, then wait until every
	// writer has finished a call it started after the kill.
	e2e.WaitFor(t, ctx, "every writer writes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range lastStart {
			if s.IsZero() {
				return false
			}
		}
		return true
	})
	killed := time.Now()
	l.Kill()
	e2e.WaitFor(t, ctx, "every writer writes after the kill", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range lastStart {
			if s.Before(killed) {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()

	// Followers learn that the last entries are committed only from a
	// leader: read once a new one serves and both survivors caught up.
	c.Leader(ctx)
	c.ConvergeNodes(ctx, survivors)
	var acks []e2e.Ack
	attempted := map[string]bool{}
	unknown := map[string]bool{}
	spanning := 0
	for _, pc := range calls {
		attempted[pc.value] = true
		if pc.start.Before(killed) && pc.end.After(killed) {
			spanning++
			t.Logf("%s: in flight at the kill, exit %d after %v", pc.value, pc.code, pc.end.Sub(pc.start).Round(time.Millisecond))
		}
		switch pc.code {
		case 0:
			var out struct {
				Results []struct {
					Partition int32 `json:"partition"`
					Offset    int64 `json:"offset"`
				} `json:"results"`
			}
			if err := json.Unmarshal([]byte(pc.stdout), &out); err != nil || len(out.Results) != 1 {
				t.Errorf("%s: exit 0 with output %q (%v)", pc.value, pc.stdout, err)
				continue
			}
			acks = append(acks, e2e.Ack{Partition: out.Results[0].Partition, Offset: out.Results[0].Offset, Value: pc.value})
		case 5:
			unknown[pc.value] = true
			if !strings.Contains(pc.stderr, "outcome unknown") {
				t.Errorf("%s: exit 5 but stderr does not say the outcome is unknown: %q", pc.value, pc.stderr)
			}
		default:
			t.Errorf("%s: exit %d after %v (want 0, or 5 when the outcome is unknown): %s", pc.value, pc.code, pc.end.Sub(pc.start).Round(time.Millisecond), pc.stderr)
		}
	}
	// check finds acknowledged records missing or moved, values written
	// twice and values never attempted, on each surviving node.
	for _, nd := range survivors {
		e2e.Check(t, nd.ReadAll(ctx, "pay", 1), acks, attempted)
	}
	t.Logf("%d calls, %d acknowledged, %d outcome unknown, %d in flight at the kill", len(calls), len(acks), len(unknown), spanning)
}
