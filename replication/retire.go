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
// the node was down) is deleted on the same proof. Listed again later,
// the node opens the group afresh and catches up, as any new replica.

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

// retire closes this node's replica of group id, if it runs one, and
// deletes its directory.
func (d *dataGroups) retire(id uint64) error {
	d.mu.Lock()
	dg := d.open[id]
	delete(d.open, id)
	d.mu.Unlock()
	var errs []error
	if dg != nil {
		errs = append(errs, dg.shutdown())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return removeGroupDir(dataGroupDir(d.n.cfg.DataDir, id))
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
