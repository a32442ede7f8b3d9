package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/logd-dev/logd/replication/fsm"
)

// Group sizes for balancing by bytes (replication/placement, BytesSlack;
// docs/operations.md "Moving replicas"): the bytes of a data group's
// partition logs, from this node's replica or asked of another replica
// (callSize). A size is a moment's; balancing evens what it saw with a
// tenth of the mean as slack, so sizes kept for sizeMaxAge do.

// callSize asks any replica of a group for the bytes of its partitions.
const callSize = "size"

// sizeMaxAge is how long a group's size is used before it is asked again.
const sizeMaxAge = 10 * time.Second

// fsmBytes is the bytes of the partition logs f holds.
func fsmBytes(f *fsm.FSM) int64 {
	var n int64
	for _, t := range f.Topics() {
		for _, p := range t.Partitions {
			if p != nil {
				n += p.Log().Size()
			}
		}
	}
	return n
}

// groupSizes caches data groups' sizes.
type groupSizes struct {
	mu sync.Mutex
	m  map[uint64]sizeAt
}

// sizeAt is a group's size as asked at a time; known is false when no
// replica answered then (and none had before).
type sizeAt struct {
	bytes int64
	known bool
	at    time.Time
}

// sizes returns the bytes of each group of tab: this node's replica's
// when it caught up, else a replica's answer, kept for sizeMaxAge; a
// group no replica answered for is left out (0 to balancing: it is
// moved by count only), or keeps its last size. An ask that failed is
// not made again before sizeMaxAge either, so unreachable replicas do
// not hold up every pass of the meta leader's runner. Groups are asked in
// parallel, each at most 2 s.
func (n *Node) groupSizes(ctx context.Context, tab fsm.DataGroupTable) map[uint64]int64 {
	out := make(map[uint64]int64, len(tab.Groups))
	var ask []uint64
	now := time.Now()
	n.sizes.mu.Lock()
	for _, g := range tab.Groups {
		if dg := n.dataGroup(g.ID); dg != nil && dg.serves() {
			out[g.ID] = fsmBytes(dg.fsm)
			continue
		}
		if s, ok := n.sizes.m[g.ID]; ok && now.Sub(s.at) < sizeMaxAge {
			if s.known {
				out[g.ID] = s.bytes
			}
			continue
		}
		ask = append(ask, g.ID)
	}
	n.sizes.mu.Unlock()
	got := make([]int64, len(ask))
	ok := make([]bool, len(ask))
	inParallel(len(ask), func(i int) error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := n.askReplica(cctx, ask[i], "", groupCall{Kind: callSize}, func(a groupAnswer) error {
			if err := answerErr(a); err != nil {
				return fmt.Errorf("%w: %v", errNextReplica, err) // an older build: ask another
			}
			return json.Unmarshal(a.Result, &got[i])
		})
		ok[i] = err == nil
		return nil
	})
	n.sizes.mu.Lock()
	defer n.sizes.mu.Unlock()
	if n.sizes.m == nil {
		n.sizes.m = map[uint64]sizeAt{}
	}
	for i, g := range ask {
		s := n.sizes.m[g]
		if ok[i] {
			s.bytes, s.known = got[i], true
		}
		s.at = now
		n.sizes.m[g] = s
		if s.known {
			out[g] = s.bytes
		}
	}
	return out
}
