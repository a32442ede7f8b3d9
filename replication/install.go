package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/logd-dev/logd/log"
)

// Snapshot catch-up (DESIGN §3.4).
//
// A snapshot holds no segment bytes, only a manifest of them. A follower
// that installs a snapshot naming data it does not hold (it was offline
// while the leader compacted its Raft log, or it is new) copies the missing
// segments, byte for byte, from a peer listed in the snapshot's node
// registry, checking every batch (log.StageSegment), then swaps them in
// (log.InstallStaged). The peer streams each file; neither side holds more
// than one batch in memory. A follower killed during an install restarts
// from its own copy of the snapshot (Raft persisted it before Restore) and
// installs again from what it has.

// SegmentRef names one segment of one partition of one topic incarnation,
// and how many of its bytes the snapshot covers.
type SegmentRef struct {
	Topic      string
	TopicIndex uint64 // the topic's CreateIndex
	Partition  int32
	Base       int64
	Bytes      int64
}

// SegmentSource reads segment files from a peer's client API address, for
// snapshot catch-up. It is implemented over HTTP by package server.
type SegmentSource interface {
	// SegmentMeta returns the segment's .meta file.
	SegmentMeta(ctx context.Context, addr string, ref SegmentRef) ([]byte, error)
	// SegmentData streams the first ref.Bytes bytes of the segment's data
	// file; the caller closes it.
	SegmentData(ctx context.Context, addr string, ref SegmentRef) (io.ReadCloser, error)
}

// ErrNoSegmentSource means a snapshot needs segment bytes this node cannot
// fetch: no peer is registered, or no source is configured.
var ErrNoSegmentSource = errors.New("replication: no peer to fetch segments from")

// SegmentFiles returns the paths of a segment's data and .meta files, for
// serving them to a peer. The segment must exist in the named topic
// incarnation (a later topic of the same name is not served).
func (f *FSM) SegmentFiles(topic string, topicIndex uint64, p int32, base int64) (data, meta string, err error) {
	t, err := f.Topic(topic)
	if err != nil {
		return "", "", err
	}
	if t.CreateIndex != topicIndex {
		return "", "", fmt.Errorf("%w: %q created at index %d, not %d", ErrUnknownTopic, topic, t.CreateIndex, topicIndex)
	}
	part, err := f.Partition(topic, p)
	if err != nil {
		return "", "", err
	}
	for _, s := range part.log.Segments() {
		if s.BaseOffset == base {
			data, meta = log.SegmentFiles(partitionDir(t, p), base)
			return data, meta, nil
		}
	}
	return "", "", fmt.Errorf("%w: %s-%d has no segment at %d", ErrUnknownPartition, topic, p, base)
}

func partitionDir(t *Topic, p int32) string { return filepath.Join(t.dir, strconv.Itoa(int(p))) }

// catchUpTopic makes the open topic t hold what manifest tm describes:
// partitions whose logs end before the manifest's are completed from a
// peer, and segments below a partition's start are deleted (a trim the
// snapshot covers). On return t's logs are open again.
func (f *FSM) catchUpTopic(t *Topic, tm topicManifest, index uint64) error {
	type plan struct {
		p      int32
		keep   []int64
		fetch  []segmentManifest
		behind int64
	}
	var plans []plan
	for i, pm := range tm.Partitions {
		l := t.Partitions[i].log
		if l.EndOffset() >= pm.End {
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
			return fmt.Errorf("catch up %s: close: %w", t.Name, err)
		}
		for _, pl := range plans {
			f.logger.Info("snapshot catch-up: fetching segments from a peer",
				"topic", t.Name, "partition", pl.p, "segments", len(pl.fetch), "offsets_behind", pl.behind, "snapshot_index", index)
			if err := f.installFromPeer(t, pl.p, pl.keep, pl.fetch); err != nil {
				return fmt.Errorf("catch up %s-%d: %w", t.Name, pl.p, err)
			}
		}
		t.Partitions = nil
		if err := openTopic(f.root, t, int32(len(tm.Partitions)), f.logOpts); err != nil {
			return err
		}
	}
	for i, pm := range tm.Partitions {
		l := t.Partitions[i].log
		if l.StartOffset() < pm.Start {
			if _, err := l.DeleteBefore(pm.Start); err != nil {
				return fmt.Errorf("catch up %s-%d: trim to %d: %w", t.Name, i, pm.Start, err)
			}
		}
	}
	return nil
}

// installFromPeer stages segs from the first peer that serves them all and
// installs them in place of every local segment not in keep. It retries
// other peers (and later rounds) until catchUpTimeout.
func (f *FSM) installFromPeer(t *Topic, p int32, keep []int64, segs []segmentManifest) error {
	dir := partitionDir(t, p)
	timeout := f.catchUp.timeout
	if timeout == 0 {
		timeout = DefaultCatchUpTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	delay := 100 * time.Millisecond
	var lastErr error
	for {
		peers := f.peers()
		if f.catchUp.source == nil || len(peers) == 0 {
			return ErrNoSegmentSource
		}
		for _, addr := range peers {
			err := f.stageFrom(ctx, addr, t, p, dir, segs)
			if err == nil {
				bases := make([]int64, len(segs))
				for i, s := range segs {
					bases[i] = s.Base
				}
				if err := log.InstallStaged(dir, f.logOpts, keep, bases); err != nil {
					// A local I/O error: retrying elsewhere will not help.
					return err
				}
				return nil
			}
			lastErr = err
			f.logger.Warn("snapshot catch-up: peer failed", "peer", addr, "topic", t.Name, "partition", p, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no peer served the segments within %v: %w", timeout, lastErr)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func (f *FSM) stageFrom(ctx context.Context, addr string, t *Topic, p int32, dir string, segs []segmentManifest) error {
	if err := log.DiscardStaged(dir, f.logOpts); err != nil {
		return err
	}
	for _, s := range segs {
		ref := SegmentRef{Topic: t.Name, TopicIndex: t.CreateIndex, Partition: p, Base: s.Base, Bytes: s.Bytes}
		meta, err := f.catchUp.source.SegmentMeta(ctx, addr, ref)
		if err != nil {
			return fmt.Errorf("segment %d meta: %w", s.Base, err)
		}
		rc, err := f.catchUp.source.SegmentData(ctx, addr, ref)
		if err != nil {
			return fmt.Errorf("segment %d data: %w", s.Base, err)
		}
		err = log.StageSegment(dir, f.logOpts, log.SegmentInfo{BaseOffset: s.Base, EndOffset: s.End, Bytes: s.Bytes}, meta, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("segment %d: %w", s.Base, err)
		}
	}
	return nil
}

// peers lists the registered API addresses of other nodes, by node id.
func (f *FSM) peers() []string {
	var out []string
	for _, n := range f.nodes.list() {
		if n.ID != f.catchUp.self && n.APIAddress != "" {
			out = append(out, n.APIAddress)
		}
	}
	return out
}

// catchUpConfig is what the FSM needs to fetch segments from peers; the
// Node sets it before Raft starts and it never changes.
type catchUpConfig struct {
	self    string // this node's id, never its own source
	source  SegmentSource
	timeout time.Duration
}

// DefaultCatchUpTimeout bounds how long one snapshot install keeps trying
// peers before it fails (Raft then sends the snapshot again).
const DefaultCatchUpTimeout = 2 * time.Minute
