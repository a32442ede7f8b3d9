package fsm

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
)

// Snapshot catch-up (docs/architecture.md).
//
// A snapshot holds no segment bytes, only a manifest of them. A follower
// that installs a snapshot naming data it does not hold (it was offline
// while the leader compacted its Raft log, or it is new) plans here which
// local segments to keep and which to copy, and hands the copy to its
// SegmentFetcher: package replication/catchup copies them byte for byte
// from a peer listed in the snapshot's node registry, checking every
// batch (log.StageSegment), and swaps them in (log.InstallStaged). The
// network, the retries and their deadlines stay out of this package. A
// follower killed during an install restarts from its own copy of the
// snapshot (Raft persisted it before Restore) and installs again from what
// it has.

// SegmentFetcher completes a partition's log from a peer during Restore.
// It is called on the FSM goroutine with the partition's log closed.
type SegmentFetcher interface {
	// FetchSegments copies req.Segments from one of req.Peers into
	// req.Dir, checking every batch, and installs them in place of every
	// local segment whose base is not in req.Keep. It returns nil once they
	// are installed, or an error once it gives up; the log is then reopened
	// from whatever the directory holds.
	FetchSegments(req FetchRequest) error
}

// FetchRequest names the segments one partition needs.
type FetchRequest struct {
	Topic      string
	TopicIndex uint64 // the topic's CreateIndex
	Partition  int32
	// Dir is the partition's directory and Log the options its log is
	// opened with.
	Dir string
	Log log.Options
	// Keep lists the bases of the local segments that stay.
	Keep []int64
	// Segments are the segments to copy, in offset order.
	Segments []SegmentExtent
	// Peers are the addresses the other nodes are called at
	// (RegisteredNode.CallAddress: a peer address, else the API address),
	// by node id.
	Peers []string
}

// SegmentExtent is a segment as a snapshot manifest lists it: its first
// offset, the offset after its last record, and its data bytes.
type SegmentExtent struct {
	Base, End, Bytes int64
}

// SegmentFiles returns the paths of a segment's data and .meta files, for
// serving them to a peer. The segment must exist in the named topic
// incarnation (a later topic of the same name is not served).
func (f *FSM) SegmentFiles(topic string, topicIndex uint64, p int32, base int64) (data, meta string, err error) {
	s, err := f.LookupSegment(topic, topicIndex, p, base)
	return s.Data, s.Meta, err
}

// ServedSegment is a segment as this node holds it now, for serving it to
// a peer that catches up.
type ServedSegment struct {
	Data, Meta string // paths of its data and .meta files
	Info       log.SegmentInfo
}

// LookupSegment finds a segment of the named topic incarnation (a later
// topic of the same name is not served). A base below the partition's
// start, or a topic incarnation deleted since, is backend.ErrSegmentGone: a
// snapshot that lists it cannot be completed from this node.
func (f *FSM) LookupSegment(topic string, topicIndex uint64, p int32, base int64) (ServedSegment, error) {
	t, err := f.Topic(topic)
	if err != nil || t.CreateIndex != topicIndex {
		// This node applied the topic's creation and holds no such
		// incarnation now: it was deleted since.
		if f.applied.Load() >= topicIndex && (err != nil || t.CreateIndex > topicIndex) {
			return ServedSegment{}, fmt.Errorf("%w: topic %q created at index %d was deleted", backend.ErrSegmentGone, topic, topicIndex)
		}
		if err != nil {
			return ServedSegment{}, err
		}
		return ServedSegment{}, fmt.Errorf("%w: %q created at index %d, not %d", backend.ErrUnknownTopic, topic, t.CreateIndex, topicIndex)
	}
	part, err := f.Partition(topic, p)
	if err != nil {
		return ServedSegment{}, err
	}
	segs := part.log.Segments()
	for _, s := range segs {
		if s.BaseOffset == base {
			data, meta := log.SegmentFiles(partitionDir(t, p), base)
			return ServedSegment{Data: data, Meta: meta, Info: s}, nil
		}
	}
	if len(segs) > 0 && base < segs[0].BaseOffset {
		return ServedSegment{}, fmt.Errorf("%w: %s-%d starts at %d, after segment %d", backend.ErrSegmentGone, topic, p, segs[0].BaseOffset, base)
	}
	return ServedSegment{}, fmt.Errorf("%w: %s-%d has no segment at %d", backend.ErrUnknownPartition, topic, p, base)
}

// listsChanged reports whether the segments a manifest lists (listed) are
// no longer all held as listed by a log holding segs: one was deleted, or
// replaced by compaction (same end, other size). The last listed segment
// may have grown since, by appends.
func listsChanged(segs []log.SegmentInfo, listed []segmentManifest) bool {
	local := make(map[int64]log.SegmentInfo, len(segs))
	for _, s := range segs {
		local[s.BaseOffset] = s
	}
	for _, m := range listed {
		s, ok := local[m.Base]
		if !ok || s.Bytes < m.Bytes || s.EndOffset == m.End && s.Bytes != m.Bytes {
			return true
		}
	}
	return false
}

func partitionDir(t *Topic, p int32) string { return filepath.Join(t.dir, strconv.Itoa(int(p))) }

// catchUpTopic makes the open topic t hold what manifest tm describes:
// partitions whose logs end before the manifest's are completed from a
// peer, and segments below a partition's start are deleted (a trim the
// snapshot covers). On return t's logs are open again. changed reports a
// partition whose log no longer holds the segments the manifest lists as
// they were (compacted or trimmed since: a restart after the snapshot), so
// the snapshot could not serve a follower's catch-up.
func (f *FSM) catchUpTopic(t *Topic, tm topicManifest, index uint64) (changed bool, err error) {
	type plan struct {
		p      int32
		keep   []int64
		fetch  []segmentManifest
		behind int64
	}
	var plans []plan
	for i, pm := range tm.Partitions {
		if pm.Elsewhere {
			continue
		}
		l := t.Partitions[i].log
		if l.EndOffset() >= pm.End {
			changed = changed || listsChanged(l.Segments(), pm.Segments)
			continue
		}
		// Keep the local segments identical to the manifest's prefix; fetch
		// the rest.
		local := map[int64]log.SegmentInfo{}
		for _, s := range l.Segments() {
			local[s.BaseOffset] = s
		}
		pl := plan{p: int32(i), behind: pm.End - l.EndOffset()}
		for j, s := range pm.Segments {
			ls, ok := local[s.Base]
			if ok && ls.EndOffset == s.End && ls.Bytes == s.Bytes && len(pl.fetch) == 0 {
				pl.keep = append(pl.keep, s.Base)
				continue
			}
			pl.fetch = pm.Segments[j:]
			break
		}
		plans = append(plans, pl)
	}
	if len(plans) > 0 {
		if err := t.close(); err != nil {
			return false, fmt.Errorf("catch up %s: close: %w", t.Name, err)
		}
		for _, pl := range plans {
			f.logger.Info("snapshot catch-up: fetching segments from a peer",
				"topic", t.Name, "partition", pl.p, "segments", len(pl.fetch), "offsets_behind", pl.behind, "snapshot_index", index)
			if err := f.fetch(t, pl.p, pl.keep, pl.fetch); err != nil {
				return false, fmt.Errorf("catch up %s-%d: %w", t.Name, pl.p, err)
			}
		}
		t.Partitions = nil
		if err := openTopic(f.root, t, int32(len(tm.Partitions)), f.logOpts); err != nil {
			return false, err
		}
	}
	for i, pm := range tm.Partitions {
		if pm.Elsewhere {
			continue
		}
		l := t.Partitions[i].log
		if l.StartOffset() < pm.Start {
			if _, err := l.DeleteBefore(pm.Start); err != nil {
				return false, fmt.Errorf("catch up %s-%d: trim to %d: %w", t.Name, i, pm.Start, err)
			}
		}
	}
	return changed, nil
}

// fetch has the fetcher copy segs of partition p of t.
func (f *FSM) fetch(t *Topic, p int32, keep []int64, segs []segmentManifest) error {
	// A fetcher that reads peers refuses an empty list itself; the one a
	// restore from a backup uses needs none (package replication/catchup).
	peers := f.peers()
	if f.catchUp.fetcher == nil {
		return backend.ErrNoSegmentSource
	}
	req := FetchRequest{Topic: t.Name, TopicIndex: t.CreateIndex, Partition: p, Dir: partitionDir(t, p), Log: f.logOpts, Keep: keep, Peers: peers}
	for _, s := range segs {
		req.Segments = append(req.Segments, SegmentExtent(s))
	}
	return f.catchUp.fetcher.FetchSegments(req)
}

// peers lists the addresses other nodes are called at, by node id: a
// node with a peer listener serves segments there only.
func (f *FSM) peers() []string {
	if f.catchUp.peers != nil {
		return f.catchUp.peers()
	}
	var out []string
	for _, n := range f.nodes.list() {
		if a := n.CallAddress(); n.ID != f.catchUp.self && a != "" {
			out = append(out, a)
		}
	}
	return out
}

// catchUpConfig is what the FSM needs to fetch segments from peers; it is
// set by New and never changes.
type catchUpConfig struct {
	self    string // this node's id, never its own source
	fetcher SegmentFetcher
	// peers, when set, lists the peers instead of the registry
	// (Config.Peers).
	peers func() []string
}

// Peers lists the addresses other nodes are called at for segments: the
// node registry's (or Config.Peers's).
func (f *FSM) Peers() []string { return f.peers() }
