package replication

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
)

// countingLogStore counts the entries stored through it.
type countingLogStore struct {
	raft.LogStore
	stored *atomic.Int64
}

func (s countingLogStore) StoreLog(l *raft.Log) error {
	s.stored.Add(1)
	return s.LogStore.StoreLog(l)
}

func (s countingLogStore) StoreLogs(ls []*raft.Log) error {
	s.stored.Add(int64(len(ls)))
	return s.LogStore.StoreLogs(ls)
}

// TestDataGroupsWrapRaftStores: Config.WrapRaftStores wraps every
// group's Raft log, the data groups' as well as the meta group's, so the
// fault builds' slow and held-back log writes reach every group.
func TestDataGroupsWrapRaftStores(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var counts []*atomic.Int64
	c := newJoinCluster(t)
	c.configure = func(_ string, cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor = 2, 1
		cfg.WrapRaftStores = func(l raft.LogStore, s raft.StableStore) (raft.LogStore, raft.StableStore) {
			n := new(atomic.Int64)
			mu.Lock()
			counts = append(counts, n)
			mu.Unlock()
			return countingLogStore{LogStore: l, stored: n}, s
		}
	}
	n := c.open(ctx, "n1", true)
	waitFor(ctx, t, "two data groups", func() bool { return len(n.FSM().DataGroups().Groups) == 2 },
		func() string { return fmt.Sprintf("%+v", n.FSM().DataGroups()) })
	b := NewBackend(n)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "w", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		rec := []backend.ProduceRecord{{Partition: p, HasPartition: true, Value: []byte("v")}}
		var err error
		waitFor(ctx, t, fmt.Sprintf("a write to w-%d", p), func() bool {
			_, err = b.Produce(ctx, backend.ProduceRequest{Topic: "w", Records: rec})
			return err == nil
		}, func() string { return fmt.Sprint(err) })
	}
	groups := len(n.FSM().DataGroups().Groups)
	if mt, _ := n.FSM().Topic("w"); len(mt.Placement) != 4 {
		t.Fatalf("w placed %v, want its 4 partitions over the data groups", mt.Placement)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(counts) != 1+groups {
		t.Fatalf("WrapRaftStores called %d times, want %d (the meta group and each data group)", len(counts), 1+groups)
	}
	for i, s := range counts {
		if s.Load() == 0 {
			t.Errorf("the log store of wrapper %d stored no entry", i)
		}
	}
}
