package cleaner

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

// DefaultInterval is how often the leader's cleaner plans retention and
// compaction when Options.Interval is zero.
const DefaultInterval = 15 * time.Second

// DefaultIOBytesPerSec bounds the leader's compaction preparation (reads
// plus writes) when Options.IOBytesPerSec is zero. One disk serves both
// the cleaner and the Raft log, whose fsync would otherwise queue behind
// a large preparation's writes and delay every produce; at this rate a
// pass over 100 MB of segments (read twice, output written once) takes
// about 10 s. Kafka's log.cleaner.io.max.bytes.per.second is unbounded by
// default.
const DefaultIOBytesPerSec = 32 << 20

// ioBytesPerSec is the configured compaction I/O budget (0: unbounded).
func ioBytesPerSec(r int64) int64 {
	switch {
	case r == 0:
		return DefaultIOBytesPerSec
	case r < 0:
		return 0
	default:
		return r
	}
}

// stats guards backend.CleanerStats.
type stats struct {
	mu sync.Mutex
	s  backend.CleanerStats // guarded by mu
}

// Stats returns the cleaner's measurements on this node.
func (c *Cleaner) Stats() backend.CleanerStats {
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	return c.stats.s
}

// Run runs a cleaner pass every Options.Interval while this node is the
// leader, and on every node closes the segment files that applied trims
// and compactions retired (which frees their space off the apply path).
// It returns when ctx ends (a pass in progress finishes its current
// partition first). Call it once.
func (c *Cleaner) Run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	release := c.state.RetiredSegments()
	for {
		select {
		case <-ctx.Done():
			return
		case <-release:
			if err := c.state.ReleaseRetired(); err != nil {
				c.log.Warn("close retired segment files", "err", err)
			}
			continue
		case <-t.C:
		}
		if !c.node.IsLeader() {
			continue
		}
		if err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("cleaner pass", "err", err)
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

// Pass runs one cleaner pass now: for every partition it plans with the
// leader's clock, proposes a Trim where segments expired, and prepares and
// proposes a Compact where one is due. Only the leader cleans
// (backend.ErrNotLeader otherwise).
func (c *Cleaner) Pass(ctx context.Context) error {
	if !c.node.IsLeader() {
		return backend.ErrNotLeader
	}
	start := time.Now()
	var errs []error
	for _, t := range c.state.Topics() {
		pol := t.RetentionPolicy()
		for _, p := range t.Hosted() { // another data group's cleaner cleans the rest
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := c.cleanPartition(ctx, t, p, pol); err != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %w", t.Name, p.Index, err))
			}
		}
	}
	c.stats.mu.Lock()
	c.stats.s.Runs++
	c.stats.s.LastPassDuration = time.Since(start)
	c.stats.s.PassDuration += c.stats.s.LastPassDuration
	c.stats.mu.Unlock()
	return errors.Join(errs...)
}

func (c *Cleaner) cleanPartition(ctx context.Context, t *fsm.Topic, p *fsm.Partition, pol retention.Policy) error {
	now := c.now()
	in := retention.Input{
		Segments:      planSegments(p.Log().Segments()),
		Policy:        pol,
		NowMs:         now.UnixMilli(),
		ProtectedFrom: c.state.ProtectedFrom(t, p.Index),
	}
	if below, ok := retention.Trim(in); ok {
		data, err := fsm.EncodeJSON(fsm.CmdTrim, now.UnixNano(), fsm.Trim{Topic: t.Name, TopicIndex: t.CreateIndex, Partition: p.Index, Below: below})
		if err != nil {
			return err
		}
		if err := c.node.Propose(ctx, data); err != nil {
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
	cc, err := p.Log().PrepareCompaction(log.CompactOptions{Below: below, TombstoneHorizon: horizon, Codec: c.state.RecordCodec(), IOBytesPerSec: c.ioBytesPerSec})
	if errors.Is(err, log.ErrCompactionStale) || errors.Is(err, log.ErrClosed) {
		return nil // the log changed under us; the next pass plans again
	}
	if err != nil {
		return err
	}
	c.stats.mu.Lock()
	c.stats.s.Prepared++
	c.stats.s.PreparedBytes += cc.Stats().InputBytes
	c.stats.s.PrepareDuration += time.Since(start)
	c.stats.mu.Unlock()
	cmd := fsm.Compact{Topic: t.Name, TopicIndex: t.CreateIndex, Partition: p.Index, Below: below, Horizon: horizon, Checksum: cc.Checksum()}
	for _, s := range cc.Sources() {
		cmd.Sources = append(cmd.Sources, fsm.SourceSegment{Base: s.BaseOffset, End: s.EndOffset, Bytes: s.Bytes, Compacted: s.Compacted})
	}
	data, err := fsm.EncodeJSON(fsm.CmdCompact, now.UnixNano(), cmd)
	if err != nil {
		cc.Discard()
		return err
	}
	defer c.state.OfferCompaction(t, p.Index, below, horizon, cc)()
	return c.node.Propose(ctx, data)
}
