package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestBackupDataGroups: a backup of a cluster of three nodes whose topics
// are placed over three data groups of two replicas (so the meta leader
// leads one group, follows one and holds no replica of the third, whose
// cut it reads from that group's leader), taken while producers keep
// writing, restores onto one node that serves every partition with every
// record, the consumer group's offsets, the queue group's acks, leases
// (a delivery leased before the backup is acked with its token after the
// restore) and dead letters, and the idempotency windows. Of the topic
// written to during the backup, each restored partition is a prefix of
// what the cluster holds, with no hole, and holds every record
// acknowledged before the backup began.
func TestBackupDataGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 2
		cfg.Log = log.Options{SegmentBytes: 1 << 10}
	})
	l := nodes[0]
	waitGroupsOfTwo(ctx, t, nodes, describe)
	b := NewBackend(l)
	want := backupWorkload(ctx, t, b, 6)

	// Producers write to "stream" before, during and after the backup.
	const streamParts = 6
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "stream", Partitions: streamParts}); err != nil {
		t.Fatal(err)
	}
	type acked struct {
		p      int32
		offset int64
		value  string
	}
	var (
		mu      sync.Mutex
		acks    []acked
		wg      sync.WaitGroup
		stopped = make(chan struct{})
	)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				select {
				case <-stopped:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, i)
				p := int32((w + i) % streamParts)
				res, err := NewBackend(nodes[w]).Produce(ctx, backend.ProduceRequest{Topic: "stream", Records: []backend.ProduceRecord{{Partition: p, HasPartition: true, Value: []byte(v)}}})
				if err != nil {
					continue // not acknowledged: may or may not be in the backup
				}
				mu.Lock()
				acks = append(acks, acked{p, res.Results[0].Offset, v})
				mu.Unlock()
			}
		}()
	}
	stopWriters := func() {
		select {
		case <-stopped:
		default:
			close(stopped)
		}
		wg.Wait()
	}
	defer stopWriters()
	waitFor(ctx, t, "records acknowledged before the backup", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 50
	}, describe)
	mu.Lock()
	before := slices.Clone(acks)
	mu.Unlock()

	// The backup is taken on a meta leader that lacks a replica of some
	// group (read at that group's leader) and follows another (read
	// here, once it applied its leader's read index), if one does.
	bl := backupNode(t, l, nodes)
	leadMeta(ctx, t, bl, nodes, describe)
	// A topic created just before the backup, which the groups may not
	// have adopted yet: its groups' cuts wait for them to.
	if _, err := NewBackend(bl).CreateTopic(ctx, backend.CreateTopic{Name: "fresh", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	began := time.Now()
	info, err := backupRetrying(ctx, t, bl, &file)
	if err != nil {
		t.Fatalf("backup: %v (%s)", err, describe())
	}
	took := time.Since(began)
	mu.Lock()
	during := len(acks) - len(before)
	mu.Unlock()
	// Let some records follow the backup, then stop.
	waitFor(ctx, t, "records acknowledged after the backup", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= len(before)+during+20
	}, describe)
	stopWriters()

	h := info.Header
	if info.Size != int64(file.Len()) || h.FormatVersion != 2 || len(h.Groups) != 3 {
		t.Fatalf("a backup of %d bytes: %+v", file.Len(), info)
	}
	elsewhere := false
	for _, g := range h.Groups {
		elsewhere = elsewhere || g.Node != bl.NodeID()
	}
	if !elsewhere {
		t.Errorf("every group's part was read on the meta leader %s: %+v", bl.NodeID(), h.Groups)
	}
	t.Logf("backup of %d bytes (%d segments, %d of their bytes; meta group at %d, data groups %+v) in %s, with %d records acknowledged while it was taken",
		file.Len(), h.Segments, h.SegmentBytes, h.Index, h.Groups, took, during)
	cluster := readTopic(ctx, t, b, "stream")

	// Restore onto one node.
	target := filepath.Join(t.TempDir(), "restored")
	raftAddr := freeAddr(t)
	began = time.Now()
	if _, err := catchup.RestoreBackup(bytes.NewReader(file.Bytes()), catchup.RestoreConfig{DataDir: target, NodeID: "r1", RaftAddress: raftAddr, Logger: fsmtest.Logger()}); err != nil {
		t.Fatal(err)
	}
	t.Logf("restored in %s", time.Since(began))
	r := openRestored(ctx, t, target, raftAddr)
	waitRestoredGroups(ctx, t, r, 3)
	checkRestored(ctx, t, r, want, true)

	if got := readTopic(ctx, t, NewBackend(r), "fresh"); len(got) != 3 {
		t.Errorf("fresh restored with %d partitions, want 3", len(got))
	}
	restored := readTopic(ctx, t, NewBackend(r), "stream")
	for p := range streamParts {
		if len(restored[p]) > len(cluster[p]) || !slices.Equal(restored[p], cluster[p][:len(restored[p])]) {
			t.Errorf("stream-%d restored %v, not a prefix of the cluster's %v", p, restored[p], cluster[p])
		}
	}
	for _, a := range before {
		if a.offset >= int64(len(restored[a.p])) {
			t.Errorf("%s, acknowledged at stream-%d@%d before the backup began, is not in it (%d records restored)", a.value, a.p, a.offset, len(restored[a.p]))
		}
	}
}

// leadMeta makes n the meta group's leader, and waits until it is ready.
func leadMeta(ctx context.Context, t *testing.T, n *Node, nodes []*Node, describe func() string) {
	t.Helper()
	waitFor(ctx, t, n.NodeID()+" leads the meta group", func() bool {
		if n.IsLeader() && n.Ready() {
			return true
		}
		for _, o := range nodes {
			if o.IsLeader() {
				// A transfer that fails (an election under load) is
				// asked again at the next look.
				_ = o.TransferLeadership(ctx, n.NodeID())
			}
		}
		return n.IsLeader() && n.Ready()
	}, describe)
}

// backupRetrying backs up through n into file, again while the meta
// leadership or a data group's leadership moves under it (elections on a
// loaded machine), at most five times.
func backupRetrying(ctx context.Context, t *testing.T, n *Node, file *bytes.Buffer) (backend.BackupInfo, error) {
	t.Helper()
	var err error
	for range 5 {
		var info backend.BackupInfo
		file.Reset()
		if info, err = n.Backup(ctx, func(backend.BackupInfo) (io.Writer, error) { return file, nil }); err == nil {
			return info, nil
		}
		if !errors.Is(err, backend.ErrNotLeader) && !errors.Is(err, backend.ErrBackupDataGroups) {
			return info, err
		}
		t.Logf("backup through %s: %v; again", n.NodeID(), err)
		if !n.IsLeader() {
			return info, err
		}
	}
	return backend.BackupInfo{}, err
}

// backupNode is the node of nodes that lacks a replica of some data group
// and follows another, else one that lacks one, else l.
func backupNode(t *testing.T, l *Node, nodes []*Node) *Node {
	t.Helper()
	tab := l.FSM().DataGroups()
	_, leaders := dataGroupsView(nodes)
	best, score := l, 0
	for _, n := range nodes {
		lacks, follows := 0, 0
		for _, g := range tab.Groups {
			switch {
			case !slices.Contains(g.Replicas, n.NodeID()):
				lacks = 1
			case leaders[g.ID] != n.NodeID():
				follows = 1
			}
		}
		if s := 2*lacks + follows; s > score {
			best, score = n, s
		}
	}
	return best
}

// waitRestoredGroups waits until r, a restored node, leads groups data
// groups alone, each with its barrier applied.
func waitRestoredGroups(ctx context.Context, t *testing.T, r *Node, groups int) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("the restored node leads %d data groups", groups), func() bool {
		reps := r.DataGroupReplicas()
		if len(reps) != groups {
			return false
		}
		for _, rep := range reps {
			dg := r.dataGroup(rep.ID)
			if dg == nil || !dg.leadsReady() {
				return false
			}
			if servers := dg.raft.GetConfiguration().Configuration().Servers; len(servers) != 1 || servers[0].ID != raft.ServerID(r.NodeID()) {
				return false
			}
		}
		return true
	}, func() string {
		return fmt.Sprintf("table %+v, replicas %+v", r.FSM().DataGroups(), r.DataGroupReplicas())
	})
}

// TestBackupDataGroupUnreachable: a data group none of whose replicas
// answers (its one replica's node is down) fails the backup with
// ErrBackupDataGroups before a byte is written.
func TestBackupDataGroupUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 1 })
	l := nodes[0]
	waitFor(ctx, t, "three groups of one voter with leaders", func() bool {
		voters, leaders := dataGroupsView(nodes)
		return len(voters) == 3 && len(leaders) == 3
	}, describe)
	if _, err := NewBackend(l).CreateTopic(ctx, backend.CreateTopic{Name: "placed", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	leadMeta(ctx, t, l, nodes, describe)
	c.mu.Lock()
	c.closed[nodes[2]] = true
	c.mu.Unlock()
	c.close(nodes[2])
	started := false
	var err error
	for range 5 { // again while the meta leadership moves under it
		if _, err = l.Backup(ctx, func(backend.BackupInfo) (io.Writer, error) { started = true; return io.Discard, nil }); !errors.Is(err, backend.ErrNotLeader) {
			break
		}
		leadMeta(ctx, t, l, nodes[:2], describe)
	}
	if !errors.Is(err, backend.ErrBackupDataGroups) || errors.Is(err, backend.ErrNotLeader) {
		t.Fatalf("a backup with a data group down: %v, want ErrBackupDataGroups alone", err)
	}
	if started {
		t.Error("the refused backup started writing")
	}
}
