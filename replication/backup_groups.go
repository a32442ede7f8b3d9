package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
)

// Backups over data groups (docs/operations.md, "Backup and restore"). A
// backup is a cut of the meta group, taken on its leader once it applied
// its barrier (so it holds every write the meta group acknowledged), and
// then a cut of each data group the meta cut places a partition in, or
// that is a consumer group's home (groups_route.go), each
// taken after the meta cut at a point that holds every write the group
// acknowledged before it was taken:
//
//   - on this node's replica when it leads the group (once it confirmed
//     its leadership and applied its barrier), or when it follows it, has
//     caught up and then applied the leader's read index (callReadIndex);
//   - else at the group's leader, which takes and holds the cut for this
//     node to read (backup_cuts.go).
//
// A group's cut must hold every partition the meta cut places in it, at
// the meta cut's placement: a group that has not adopted a topic yet is
// cut again, for at most cutAdoptWait. It must hold nothing the meta
// group made after its cut (a topic created, or grown, later): the restored
// meta group would not know it. When the topics changed between the cuts
// (created, deleted, grown), the whole backup is cut again, up to
// backupCutAttempts times. Every cut is taken before the file's first
// byte (its header gives the file's size) and held, its files open, until
// the file is written.
//
// Across groups a backup is not one instant: each group's cut is one
// point of that group's history, later than the meta cut, and two groups'
// cuts are at different times. Records appended to one group after its
// cut but before a later group's cut are in the second group's part and
// not the first's; a produce that spanned groups may be in the backup in
// part (as it may fail in part).

const (
	// backupCutAttempts bounds the backups cut again because the topics
	// changed between the meta group's cut and a data group's.
	backupCutAttempts = 3
	// cutAdoptWait bounds how long a data group's cut waits for the group
	// to adopt the partitions the meta cut places in it.
	cutAdoptWait = 10 * time.Second
	// cutApplyWait bounds how long this node's follower replica of a
	// group may take to apply its leader's read index before the group's
	// cut is taken at its leader instead.
	cutApplyWait = 2 * time.Second
)

// errCutsChanged means the topics changed between the meta group's cut
// and a data group's: the backup is cut again.
var errCutsChanged = errors.New("the topics changed between the meta group's cut and a data group's")

// Backup writes a backup of the cluster's state (see above): on the meta
// leader once it applied its barrier (ErrNotLeader elsewhere, so that it
// holds every write acknowledged before the call). A data group whose
// cut cannot be taken (no reachable leader, topics not adopted in time,
// topics that keep changing) fails it with backend.ErrBackupDataGroups
// before anything is written.
func (n *Node) Backup(ctx context.Context, start func(backend.BackupInfo) (io.Writer, error)) (backend.BackupInfo, error) {
	if !n.IsLeader() {
		return backend.BackupInfo{}, backend.ErrNotLeader
	}
	if !n.metaReady() {
		return backend.BackupInfo{}, fmt.Errorf("%w: the leader has not applied its barrier yet", backend.ErrNotLeader)
	}
	var lastErr error
	for range backupCutAttempts {
		info, err := n.backupOnce(ctx, start)
		if !errors.Is(err, errCutsChanged) {
			return info, err
		}
		lastErr = err
		n.cfg.Logger.Info("backup: cutting again", "err", err)
	}
	return backend.BackupInfo{}, fmt.Errorf("%w: %d cuts in a row: %w", backend.ErrBackupDataGroups, backupCutAttempts, lastErr)
}

// backupOnce cuts the meta group and the data groups and writes the file.
func (n *Node) backupOnce(ctx context.Context, start func(backend.BackupInfo) (io.Writer, error)) (backend.BackupInfo, error) {
	meta, err := catchup.TakeCut(ctx, catchup.BackupSource{Snapshots: raftSnapshots{r: n.raft, snaps: n.stores.snaps, applied: n.fsm.AppliedIndex},
		Segments: n.fsm, NodeID: n.cfg.NodeID, Logger: n.cfg.Logger})
	if err != nil {
		return backend.BackupInfo{}, err
	}
	var (
		cuts   []*catchup.Cut
		remote []*remoteCut
	)
	defer func() {
		meta.Close()
		for _, c := range cuts {
			c.Close()
		}
	}()
	for _, g := range backupGroups(meta.Info, n.fsm.DataGroupHomes()) {
		c, rc, err := n.groupCut(ctx, g, meta.Info)
		if err != nil {
			return backend.BackupInfo{}, err
		}
		cuts = append(cuts, c)
		if rc != nil {
			remote = append(remote, rc)
		}
	}
	stop := keepCuts(ctx, remote)
	defer stop()
	return catchup.WriteBackup(ctx, catchup.BackupFile{Meta: meta, Groups: cuts, NodeID: n.cfg.NodeID, Now: n.cfg.Now, Logger: n.cfg.Logger}, start)
}

// backupGroups are the data groups a backup cuts, ascending: those the
// meta cut places partitions in, and the homes of consumer groups (read
// after the meta cut: a home is never dropped, so these hold every home
// the cut records).
func backupGroups(meta catchup.CutInfo, homes []uint64) []uint64 {
	out := placedGroups(meta)
	for _, h := range homes {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// placedGroups are the data groups the meta cut places partitions in,
// ascending.
func placedGroups(meta catchup.CutInfo) []uint64 {
	var out []uint64
	for _, t := range meta.Topics {
		for _, g := range t.Placement {
			if g != 0 && !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	slices.Sort(out)
	return out
}

// groupCut takes the cut of data group g for a backup whose meta cut is
// meta (see above). The remoteCut is the cut's body when another node
// holds it, for keepCuts.
func (n *Node) groupCut(ctx context.Context, g uint64, meta catchup.CutInfo) (*catchup.Cut, *remoteCut, error) {
	deadline := time.Now().Add(cutAdoptWait)
	for attempt := 0; ; attempt++ {
		c, rc, err := n.takeGroupCut(ctx, g)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("data group %d: %w", g, ctx.Err())
			}
			// The group's error as text: a client told NOT_LEADER, say,
			// would ask the meta leader again at once.
			return nil, nil, fmt.Errorf("%w: data group %d: %v", backend.ErrBackupDataGroups, g, err)
		}
		missing, ahead := compareCuts(meta, c.Info)
		if len(ahead) > 0 {
			c.Close()
			return nil, nil, fmt.Errorf("%w: data group %d holds %s, which the meta group's cut at %d does not", errCutsChanged, g, strings.Join(ahead, ", "), meta.Index)
		}
		if len(missing) == 0 {
			return c, rc, nil
		}
		c.Close()
		for _, m := range missing {
			// A topic the meta group deleted, replaced or grew since its
			// cut will not be adopted as the cut has it.
			if t, err := n.fsm.Topic(m.name); err != nil || t.CreateIndex != m.createIndex || t.PlacementEpoch != m.epoch {
				return nil, nil, fmt.Errorf("%w: topic %s~%d changed since the meta group's cut at %d", errCutsChanged, m.name, m.createIndex, meta.Index)
			}
		}
		what := fmt.Sprintf("data group %d at index %d has not adopted %s of the meta group's cut at %d", g, c.Info.Index, missing[0], meta.Index)
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%w: %s within %s", backend.ErrBackupDataGroups, what, cutAdoptWait)
		}
		n.cfg.Logger.Debug("backup: waiting for a data group to adopt its partitions", "what", what)
		if dg := n.dataGroup(g); dg != nil && dg.raft.State() == raft.Leader {
			n.data.adopt(dg)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(min(time.Duration(attempt+1)*50*time.Millisecond, 500*time.Millisecond)):
		}
	}
}

// missingTopic is a topic incarnation, at a placement epoch, that a data
// group's cut lacks partitions of.
type missingTopic struct {
	name        string
	createIndex uint64
	epoch       uint64
}

func (m missingTopic) String() string {
	return fmt.Sprintf("topic %s~%d at placement epoch %d", m.name, m.createIndex, m.epoch)
}

// compareCuts compares a data group's cut with the meta group's: the
// topics the meta cut places partitions in the group that the group's cut
// does not hold as placed (missing), and what the group's cut holds that
// the meta group made after its cut (ahead: a topic created or grown
// later). A topic the group holds that the meta cut does not and that
// was created at or before the meta cut is neither: the meta group
// deleted it before its cut, and the group drops it once it applies that
// (data_groups.go, adopt), as the restored node's does.
func compareCuts(meta, group catchup.CutInfo) (missing []missingTopic, ahead []string) {
	g := group.Group
	inMeta := map[string]bool{}
	for _, mt := range meta.Topics {
		inMeta[fmt.Sprintf("%s~%d", mt.Name, mt.CreateIndex)] = true
		var placed []int32
		for p, pg := range mt.Placement {
			if pg == g {
				placed = append(placed, int32(p))
			}
		}
		if len(placed) == 0 {
			continue
		}
		i := slices.IndexFunc(group.Topics, func(t fsm.SnapshotTopic) bool { return t.Name == mt.Name })
		switch {
		case i < 0 || group.Topics[i].CreateIndex < mt.CreateIndex:
			missing = append(missing, missingTopic{mt.Name, mt.CreateIndex, mt.PlacementEpoch})
		case group.Topics[i].CreateIndex > mt.CreateIndex:
			// A later incarnation, created after the meta cut (which
			// would hold it otherwise): ahead, below.
		case group.Topics[i].PlacementEpoch > mt.PlacementEpoch:
			ahead = append(ahead, fmt.Sprintf("topic %s~%d at placement epoch %d", mt.Name, mt.CreateIndex, group.Topics[i].PlacementEpoch))
		default:
			gt := group.Topics[i]
			for _, p := range placed {
				if !slices.Contains(gt.Hosted, p) {
					missing = append(missing, missingTopic{mt.Name, mt.CreateIndex, mt.PlacementEpoch})
					break
				}
			}
		}
	}
	for _, gt := range group.Topics {
		if gt.CreateIndex > meta.Index && !inMeta[fmt.Sprintf("%s~%d", gt.Name, gt.CreateIndex)] {
			ahead = append(ahead, fmt.Sprintf("topic %s~%d", gt.Name, gt.CreateIndex))
		}
	}
	return missing, ahead
}

// takeGroupCut takes a cut of data group g that holds every write the
// group acknowledged before the call: on this node's replica when it
// leads the group or follows it caught up, else at the group's leader.
func (n *Node) takeGroupCut(ctx context.Context, g uint64) (*catchup.Cut, *remoteCut, error) {
	if dg := n.dataGroup(g); dg != nil && !dg.left.Load() && dg.raft.State() != raft.Leader && dg.serves() {
		c, err := n.followerCut(ctx, dg)
		if err == nil {
			return c, nil, nil
		}
		n.cfg.Logger.Debug("backup: this node's replica of a data group is not cut; asking its leader", "group", g, "err", err)
	}
	var (
		c  *catchup.Cut
		rc *remoteCut
	)
	err := n.inGroup(ctx, g, func(h groupHandle) error {
		dg := n.dataGroup(g)
		if dg == nil || !n.data.servesNow(dg) || !dg.confirmLeader() {
			return fmt.Errorf("%w: data group %d", backend.ErrNotLeader, g)
		}
		var err error
		c, err = n.groupCutHere(ctx, dg, dg.fsm.AppliedIndex())
		return err
	}, groupCall{Kind: callCutOpen}, func(ans groupAnswer) error {
		var o cutOpened
		if err := json.Unmarshal(ans.Result, &o); err != nil {
			return fmt.Errorf("data group %d: a cut answer: %w", g, err)
		}
		if o.Info.Group != g || o.ID == "" || o.Info.Node == "" {
			return fmt.Errorf("data group %d: a cut answer for group %d at node %q", g, o.Info.Group, o.Info.Node)
		}
		rc = &remoteCut{n: n, ctx: ctx, g: g, node: o.Info.Node, id: o.ID}
		c = catchup.NewCut(o.Info, rc, rc.release)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return c, rc, nil
}

// followerCut takes a cut of dg, a caught-up follower replica, once it
// applied its leader's read index.
func (n *Node) followerCut(ctx context.Context, dg *dataGroup) (*catchup.Cut, error) {
	var index uint64
	err := n.inGroup(ctx, dg.id, func(groupHandle) error {
		// This node leads the group now: the caller asks again.
		return fmt.Errorf("this node leads data group %d now", dg.id)
	}, groupCall{Kind: callReadIndex}, func(ans groupAnswer) error {
		return json.Unmarshal(ans.Result, &index)
	})
	if err != nil {
		return nil, err
	}
	if dg.awaitApplied(ctx, index, cutApplyWait); dg.fsm.AppliedIndex() < index {
		return nil, fmt.Errorf("data group %d applied %d here, below its leader's %d", dg.id, dg.fsm.AppliedIndex(), index)
	}
	return n.groupCutHere(ctx, dg, index)
}

// keepCuts touches the cuts other nodes hold for this backup while it is
// written, so that none is released as idle before it is read; the
// returned func stops it and waits for it.
func keepCuts(ctx context.Context, cuts []*remoteCut) func() {
	if len(cuts) == 0 {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(cutIdle / 4)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, c := range cuts {
				if err := c.touch(ctx); err != nil {
					c.n.cfg.Logger.Warn("backup: keep a data group's cut", "group", c.g, "node", c.node, "err", err)
				}
			}
		}
	}()
	return func() {
		close(stop)
		wg.Wait()
	}
}
