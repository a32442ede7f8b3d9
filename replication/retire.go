package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/replication/fsm"
)

// Retiring the replicas a node no longer holds (docs/architecture.md,
// "Data groups"). When the table stops listing this node as a replica of
// a group (the group moved away: balanced, drained, evacuated), its
// replica keeps running at first: while it leads, it still converges the
// group and hands the leadership over, and a move not yet finished may
// still count on it. Once the table has not listed it for retireAfter,
// marks no move of the group, and the group's leader answers that its
// committed configuration no longer names this node, the replica is of
// no use to anyone: this node closes it and deletes its directory. A
// directory of a group this node does not run (it was moved away while
// the node was down) is deleted on the same proof, asked again once the
// replica is closed (a replica still running could have been added back
// and promoted in between). A tombstone (g<id>.left) stays: listed again
// later, the node opens the group afresh and catches up from the group's
// leader, as any new replica, and never bootstraps it again, even as one
// of its bootstrap replicas (mayBootstrap).

// retireAfter is how long a replica the table no longer lists keeps
// running before this node asks whether it may delete it.
const retireAfter = 30 * time.Second

// retireEvery is how often the runner looks for replicas to retire.
const retireEvery = 2 * time.Second

// retiredSuffix marks a group directory being deleted: it is renamed
// first, so a crash in the middle never leaves half a replica that
// would open as one. Startup deletes what is left of such directories.
const retiredSuffix = ".retired"

// callMembers asks a group's leader for its configuration's members and
// whether that configuration is committed.
const callMembers = "members"

// membersAnswer is a leader's answer to callMembers.
type membersAnswer struct {
	// Members are the ids in the leader's latest configuration, voters
	// or not.
	Members []string `json:"members"`
	// Committed reports whether that configuration's entry is committed.
	Committed bool `json:"committed"`
}

// leaderMembers answers callMembers on dg, which this node leads.
func leaderMembers(dg *dataGroup) (membersAnswer, error) {
	cf := dg.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return membersAnswer{}, err
	}
	var a membersAnswer
	for _, s := range cf.Configuration().Servers {
		a.Members = append(a.Members, string(s.ID))
	}
	slices.Sort(a.Members)
	a.Committed = cf.Index() <= dg.raft.CommitIndex()
	return a, nil
}

// removedFrom reports whether the leader of group g says its committed
// configuration does not name this node.
func (n *Node) removedFrom(ctx context.Context, g uint64) (bool, error) {
	var got membersAnswer
	err := n.askReplica(ctx, g, "", groupCall{Kind: callMembers}, func(a groupAnswer) error {
		if a.Err != nil {
			return a.Err.decode()
		}
		return json.Unmarshal(a.Result, &got)
	})
	if err != nil {
		return false, err
	}
	return got.Committed && len(got.Members) > 0 && !slices.Contains(got.Members, n.cfg.NodeID), nil
}

// retireLeft closes and deletes the replicas and directories of groups
// the table tab has not listed this node in for retireAfter, once their
// leaders confirm (see above). It runs on the runner's goroutine.
func (d *dataGroups) retireLeft(tab fsm.DataGroupTable) {
	n := d.n
	after := cmpDuration(n.cfg.retireAfter, retireAfter)
	now := time.Now()
	listed := map[uint64]bool{}
	moving := map[uint64]bool{}
	for _, g := range tab.Groups {
		listed[g.ID] = slices.Contains(g.Replicas, n.cfg.NodeID)
		moving[g.ID] = g.Move != nil
	}
	candidates := map[uint64]bool{}
	d.mu.Lock()
	for id, dg := range d.open {
		if !listed[id] && dg.raft.State() != raft.Leader {
			candidates[id] = true
		}
	}
	d.mu.Unlock()
	for _, id := range d.groupDirs() {
		if !listed[id] && n.dataGroup(id) == nil {
			candidates[id] = true
		}
	}
	for id := range d.leftSince {
		if !candidates[id] {
			delete(d.leftSince, id)
		}
	}
	for id := range candidates {
		since, ok := d.leftSince[id]
		if !ok {
			d.leftSince[id] = now
			continue
		}
		// A group the table does not know is never deleted here: the
		// table may be behind this node's own state.
		if _, known := moving[id]; !known || moving[id] || now.Sub(since) < after {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		removed, err := n.removedFrom(ctx, id)
		cancel()
		if err != nil || !removed {
			if err != nil {
				n.cfg.Logger.Debug("a replica the table no longer lists: its group's leader not asked", "group", id, "err", err)
			}
			continue
		}
		if err := d.retire(id); err != nil {
			if errors.Is(err, errStillMember) {
				delete(d.leftSince, id)
				n.cfg.Logger.Info("a data group replica not retired: the group has this node again", "group", id)
				continue
			}
			n.cfg.Logger.Warn("retire a data group replica", "group", id, "err", err)
			continue
		}
		delete(d.leftSince, id)
		n.cfg.Logger.Info("retired a data group replica the group no longer has: closed, its directory deleted", "group", id)
	}
}

// cmpDuration is d, or def when d is 0.
func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// errStillMember is retire's answer when the group's leader named this
// node again once its replica was closed: the directory is kept, and the
// replica opens again from it.
var errStillMember = errors.New("the group's leader names this node again: its replica is kept")

// retire closes this node's replica of group id, if it runs one, asks the
// group's leader again whether its committed configuration leaves this
// node out (the table may have listed the node again since the first
// answer, and a replica still running could have been added back and
// promoted: once closed it can no longer be), and then leaves a tombstone
// (this node never bootstraps the group again: mayBootstrap) and deletes
// the directory.
func (d *dataGroups) retire(id uint64) error {
	n := d.n
	if n.listedIn(id) {
		return errStillMember
	}
	d.mu.Lock()
	dg := d.open[id]
	delete(d.open, id)
	d.mu.Unlock()
	if dg != nil {
		if err := dg.shutdown(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	removed, err := n.removedFrom(ctx, id)
	cancel()
	if err != nil {
		return fmt.Errorf("ask group %d's leader again: %w", id, err)
	}
	if !removed || n.listedIn(id) {
		return errStillMember
	}
	if err := writeTombstone(n.cfg.DataDir, id); err != nil {
		return err
	}
	return removeGroupDir(dataGroupDir(n.cfg.DataDir, id))
}

// listedIn reports whether the table this node applied lists it as a
// replica of group id.
func (n *Node) listedIn(id uint64) bool {
	for _, g := range n.fsm.DataGroups().Groups {
		if g.ID == id {
			return slices.Contains(g.Replicas, n.cfg.NodeID)
		}
	}
	return false
}

// groupTombstone is the file that says this node held data group id once
// and retired its replica.
func groupTombstone(dataDir string, id uint64) string {
	return dataGroupDir(dataDir, id) + ".left"
}

// writeTombstone makes group id's tombstone durable (the file and its
// directory's entry synced) before its replica's directory is deleted.
func writeTombstone(dataDir string, id uint64) error {
	name := groupTombstone(dataDir, id)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("tombstone of group %d: %w", id, err)
	}
	err = errors.Join(f.Sync(), f.Close())
	if err == nil {
		var dir *os.File
		if dir, err = os.Open(filepath.Dir(name)); err == nil {
			err = errors.Join(dir.Sync(), dir.Close())
		}
	}
	if err != nil {
		return fmt.Errorf("tombstone of group %d: %w", id, err)
	}
	return nil
}

// removeGroupDir renames dir aside, then deletes it.
func removeGroupDir(dir string) error {
	aside := dir + retiredSuffix
	if err := os.Rename(dir, aside); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("retire %s: %w", dir, err)
	}
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("retire %s: %w", dir, err)
	}
	return nil
}

// groupDirs returns the ids of the group directories under the data dir,
// deleting what is left of retired ones.
func (d *dataGroups) groupDirs() []uint64 {
	root := filepath.Join(d.n.cfg.DataDir, "groups")
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var ids []uint64
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "g") {
			continue
		}
		if strings.HasSuffix(name, retiredSuffix) {
			if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
				d.n.cfg.Logger.Warn("delete a retired data group directory", "dir", name, "err", err)
			}
			continue
		}
		if id, err := strconv.ParseUint(name[1:], 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
