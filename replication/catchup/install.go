package catchup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
)

// Snapshot catch-up, the network side (docs/architecture.md). The state
// machine plans which segments a snapshot needs (replication/fsm
// catchup.go) and calls its SegmentFetcher; segmentFetcher is that fetcher:
// it copies the segments, byte for byte, from a peer through a
// SegmentSource, checking every batch (log.StageSegment), swaps them in
// (log.InstallStaged), and retries other peers until its timeout. The
// peer streams each file; neither side holds more than one batch in memory.
//
// A snapshot lists segments as they were at its index; compactions, trims
// and topic deletions applied later replace or delete them on every
// replica alike, so a snapshot can go stale while no write follows it.
// Peers answer such a segment as gone (segment_serve.go), the install then
// fails at once, and the leader, whose latest snapshot lists changed
// segments, takes a newer one within its snapshot interval (package
// replication, Node.renewStaleSnapshot), which Raft sends next. A
// compaction that lands during an install fails that install too; the
// next one starts from the renewed snapshot.

// SegmentRef names one segment of one partition of one topic incarnation,
// and its end offset and how many of its bytes the snapshot covers.
type SegmentRef struct {
	Topic      string
	TopicIndex uint64 // the topic's CreateIndex
	Partition  int32
	Base       int64
	// End is the offset after the segment's last record as the snapshot
	// lists it; a negative End is unknown.
	End   int64
	Bytes int64
}

// SegmentSource reads segment files from a peer's client API address, for
// snapshot catch-up. SegmentClient implements it over HTTP (segment_fetch.go).
type SegmentSource interface {
	// SegmentMeta returns the segment's .meta file.
	SegmentMeta(ctx context.Context, addr string, ref SegmentRef) ([]byte, error)
	// SegmentData streams the first ref.Bytes bytes of the segment's data
	// file; the caller closes it.
	SegmentData(ctx context.Context, addr string, ref SegmentRef) (io.ReadCloser, error)
}

// DefaultCatchUpTimeout bounds how long one snapshot install keeps trying
// peers before it fails (Raft then sends the snapshot again).
const DefaultCatchUpTimeout = 2 * time.Minute

// segmentFetcher implements fsm.SegmentFetcher over a SegmentSource.
type segmentFetcher struct {
	source  SegmentSource
	timeout time.Duration // 0: DefaultCatchUpTimeout
	logger  *slog.Logger
}

// NewSegmentFetcher returns a state machine's fetcher
// (fsm.Config.Fetcher): it copies segments from peers through source and
// gives up after timeout (0: DefaultCatchUpTimeout), logging peers'
// failures to logger (nil: slog.Default()). Without a source it returns
// nil: the state machine then refuses a snapshot ahead of its data. It
// starts nothing.
func NewSegmentFetcher(source SegmentSource, timeout time.Duration, logger *slog.Logger) fsm.SegmentFetcher {
	if source == nil {
		return nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &segmentFetcher{source: source, timeout: timeout, logger: logger}
}

// catchUpLogEvery bounds how often a failing install logs its peers'
// failures at warning level; the others go to debug.
const catchUpLogEvery = 10 * time.Second

// FetchSegments stages the segments from the first peer that serves them
// all and installs them in place of every local segment not kept. It
// retries other peers (and later rounds, backing off) until the timeout,
// but gives up after a round in which a peer answered that a segment
// changed since the snapshot listed it (backend.ErrSegmentGone): the peers
// applied a compaction, trim or topic deletion past the snapshot, so no
// retry of this snapshot can complete. Raft then sends the leader's latest
// snapshot again, which the leader renews once its segments changed
// (package replication), so the follower converges without further writes.
func (s *segmentFetcher) FetchSegments(req fsm.FetchRequest) error {
	if len(req.Peers) == 0 {
		return backend.ErrNoSegmentSource
	}
	timeout := s.timeout
	if timeout == 0 {
		timeout = DefaultCatchUpTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	delay := 100 * time.Millisecond
	var (
		lastErr, goneErr error
		failures         int // since the last warning
		lastWarn         time.Time
	)
	for {
		for _, addr := range req.Peers {
			err := s.stageFrom(ctx, addr, req)
			if err == nil {
				bases := make([]int64, len(req.Segments))
				for i, seg := range req.Segments {
					bases[i] = seg.Base
				}
				// A local I/O error: retrying elsewhere will not help.
				return log.InstallStaged(req.Dir, req.Log, req.Keep, bases)
			}
			lastErr = err
			if errors.Is(err, backend.ErrSegmentGone) {
				goneErr = err
			}
			failures++
			if time.Since(lastWarn) >= catchUpLogEvery {
				s.logger.Warn("snapshot catch-up: peer failed", "peer", addr, "topic", req.Topic, "partition", req.Partition,
					"failures", failures, "err", err)
				lastWarn, failures = time.Now(), 0
			} else {
				s.logger.Debug("snapshot catch-up: peer failed", "peer", addr, "topic", req.Topic, "partition", req.Partition, "err", err)
			}
		}
		if goneErr != nil {
			return fmt.Errorf("snapshot lists segments its peers no longer hold: %w", goneErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no peer served the segments within %v: %w", timeout, lastErr)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func (s *segmentFetcher) stageFrom(ctx context.Context, addr string, req fsm.FetchRequest) error {
	if err := log.DiscardStaged(req.Dir, req.Log); err != nil {
		return err
	}
	for _, seg := range req.Segments {
		ref := SegmentRef{Topic: req.Topic, TopicIndex: req.TopicIndex, Partition: req.Partition, Base: seg.Base, End: seg.End, Bytes: seg.Bytes}
		meta, err := s.source.SegmentMeta(ctx, addr, ref)
		if err != nil {
			return fmt.Errorf("segment %d meta: %w", seg.Base, err)
		}
		rc, err := s.source.SegmentData(ctx, addr, ref)
		if err != nil {
			return fmt.Errorf("segment %d data: %w", seg.Base, err)
		}
		err = log.StageSegment(req.Dir, req.Log, log.SegmentInfo{BaseOffset: seg.Base, EndOffset: seg.End, Bytes: seg.Bytes}, meta, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("segment %d: %w", seg.Base, err)
		}
	}
	return nil
}
