package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/retention"
)

// DefaultCleanerInterval is how often the leader's cleaner plans retention
// and compaction when Config.CleanerInterval is zero.
const DefaultCleanerInterval = 15 * time.Second

// DefaultCleanerIOBytesPerSec bounds the leader's compaction preparation
// (reads plus writes) when Config.CleanerIOBytesPerSec is zero. One disk
// serves both the cleaner and the Raft log, whose fsync would otherwise
// queue behind a large preparation's writes and delay every produce; at
// this rate a pass over 100 MB of segments (read twice, output written
// once) takes about 10 s. Kafka's log.cleaner.io.max.bytes.per.second is
// unbounded by default.
const DefaultCleanerIOBytesPerSec = 32 << 20

// cleanerIOBytesPerSec is the configured compaction I/O budget (0:
// unbounded).
func (n *Node) cleanerIOBytesPerSec() int64 {
	switch r := n.cfg.CleanerIOBytesPerSec; {
	case r == 0:
		return DefaultCleanerIOBytesPerSec
	case r < 0:
		return 0
	default:
		return r
	}
}

// cleanerStats guards backend.CleanerStats.
type cleanerStats struct {
	mu sync.Mutex
	s  backend.CleanerStats // guarded by mu
}

// CleanerStats returns the cleaner's measurements on this node.
func (n *Node) CleanerStats() backend.CleanerStats {
	n.cleanerStats.mu.Lock()
	defer n.cleanerStats.mu.Unlock()
	return n.cleanerStats.s
}

// runCleaner runs a cleaner pass every CleanerInterval while this node is
// the leader, and on every node closes the segment files that applied trims
// and compactions retired (which frees their space off the apply path). It
// ends when Close closes n.stop; Close waits for it (a pass in progress
// finishes its current partition first).
func (n *Node) runCleaner() {
	defer close(n.cleanerDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	interval := n.cfg.CleanerInterval
	if interval <= 0 {
		interval = DefaultCleanerInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	release := n.fsm.RetiredSegments()
	for {
		select {
		case <-ctx.Done():
			return
		case <-release:
			if err := n.fsm.ReleaseRetired(); err != nil {
				n.cfg.Logger.Warn("close retired segment files", "err", err)
			}
			continue
		case <-t.C:
		}
		if !n.IsLeader() {
			continue
		}
		if err := n.Clean(ctx); err != nil && ctx.Err() == nil {
			n.cfg.Logger.Warn("cleaner pass", "err", err)
		}
	}
}

func planSegments(segs []log.SegmentInfo) []retention.Segment {
	out := make([]retention.Segment, len(segs))
	for i, s := range segs {
		out[i] = retention.Segment{
			Base: s.BaseOffset, End: s.EndOffset, Bytes: s.Bytes, MaxTimestamp: s.MaxTimestamp,
			Closed: s.Closed, Compacted: s.Compacted, OldestTombstone: s.OldestTombstone,
		}
	}
	return out
}

// Clean runs one cleaner pass now: for every partition it plans with the
// leader's clock, proposes a Trim where segments expired, and prepares and
// proposes a Compact where one is due. Only the leader cleans
// (backend.ErrNotLeader otherwise).
func (n *Node) Clean(ctx context.Context) error {
	if !n.IsLeader() {
		return backend.ErrNotLeader
	}
	start := time.Now()
	var errs []error
	for _, t := range n.fsm.Topics() {
		pol := t.RetentionPolicy()
		for _, p := range t.Partitions {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := n.cleanPartition(ctx, t, p, pol); err != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %w", t.Name, p.Index, err))
			}
		}
	}
	n.cleanerStats.mu.Lock()
	n.cleanerStats.s.Runs++
	n.cleanerStats.s.LastPassDuration = time.Since(start)
	n.cleanerStats.s.PassDuration += n.cleanerStats.s.LastPassDuration
	n.cleanerStats.mu.Unlock()
	return errors.Join(errs...)
}

func (n *Node) cleanPartition(ctx context.Context, t *fsm.Topic, p *fsm.Partition, pol retention.Policy) error {
	now := n.cfg.Now()
	in := retention.Input{
		Segments:      planSegments(p.Log().Segments()),
		Policy:        pol,
		NowMs:         now.UnixMilli(),
		ProtectedFrom: n.fsm.ProtectedFrom(t, p.Index),
	}
	if below, ok := retention.Trim(in); ok {
		data, err := fsm.EncodeJSON(fsm.CmdTrim, now.UnixNano(), fsm.Trim{Topic: t.Name, TopicIndex: t.CreateIndex, Partition: p.Index, Below: below})
		if err != nil {
			return err
		}
		if _, err := n.propose(ctx, data); err != nil {
			return err
		}
		in.Segments = planSegments(p.Log().Segments())
	}
	below, horizon, ok := retention.Compaction(in)
	if !ok {
		return nil
	}
	// The expensive part, here on the cleaner goroutine while appends go
	// on; Apply then only swaps the files in.
	start := time.Now()
	cc, err := p.Log().PrepareCompaction(log.CompactOptions{Below: below, TombstoneHorizon: horizon, Codec: n.fsm.RecordCodec(), IOBytesPerSec: n.cleanerIOBytesPerSec()})
	if errors.Is(err, log.ErrCompactionStale) || errors.Is(err, log.ErrClosed) {
		return nil // the log changed under us; the next pass plans again
	}
	if err != nil {
		return err
	}
	n.cleanerStats.mu.Lock()
	n.cleanerStats.s.Prepared++
	n.cleanerStats.s.PreparedBytes += cc.Stats().InputBytes
	n.cleanerStats.s.PrepareDuration += time.Since(start)
	n.cleanerStats.mu.Unlock()
	cmd := fsm.Compact{Topic: t.Name, TopicIndex: t.CreateIndex, Partition: p.Index, Below: below, Horizon: horizon, Checksum: cc.Checksum()}
	for _, s := range cc.Sources() {
		cmd.Sources = append(cmd.Sources, fsm.SourceSegment{Base: s.BaseOffset, End: s.EndOffset, Bytes: s.Bytes, Compacted: s.Compacted})
	}
	data, err := fsm.EncodeJSON(fsm.CmdCompact, now.UnixNano(), cmd)
	if err != nil {
		cc.Discard()
		return err
	}
	defer n.fsm.OfferCompaction(t, p.Index, below, horizon, cc)()
	_, err = n.propose(ctx, data)
	return err
}
