package replication

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/fsm"
)

// TestCloseEndsAbandonedProposals: proposals whose callers gave up are
// still in Raft when the node closes. Raft drops the futures it has
// committed but not applied when it shuts down, so Close must let those
// proposals finish first; afterwards no goroutine may still wait on one.
func TestCloseEndsAbandonedProposals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openTestNode(t, ctx, t.TempDir())
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "w", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The caller gives up at once; the append itself goes on.
			pctx, pcancel := context.WithTimeout(ctx, time.Microsecond)
			defer pcancel()
			_, _ = NewBackend(n).appendCommand(pctx, fsm.Append{Topic: "w", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, fmt.Sprint(i))}}})
		}()
	}
	wg.Wait()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if left := n.applyWaiters.Load(); left != 0 {
		t.Fatalf("%d proposals still wait on Raft after Close", left)
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "replication.(*Node).propose.func") {
		t.Fatalf("a proposal's wait outlived Close:\n%s", stacks)
	}
}
