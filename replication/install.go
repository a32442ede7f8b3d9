package replication

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
)

// Snapshot catch-up, the network side (docs/architecture.md). The state
// machine plans which segments a snapshot needs (replication/fsm
// catchup.go) and calls its SegmentFetcher; segmentFetcher is that fetcher:
// it copies the segments, byte for byte, from a peer through a
// SegmentSource, checking every batch (log.StageSegment), swaps them in
// (log.InstallStaged), and retries other peers until CatchUpTimeout. The
// peer streams each file; neither side holds more than one batch in memory.

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

// newSegmentFetcher returns the state machine's fetcher, nil without a
// source (the state machine then refuses a snapshot ahead of its data).
func newSegmentFetcher(source SegmentSource, timeout time.Duration, logger *slog.Logger) fsm.SegmentFetcher {
	if source == nil {
		return nil
	}
	return &segmentFetcher{source: source, timeout: timeout, logger: logger}
}

// FetchSegments stages the segments from the first peer that serves them
// all and installs them in place of every local segment not kept. It
// retries other peers (and later rounds) until the timeout.
func (s *segmentFetcher) FetchSegments(req fsm.FetchRequest) error {
	timeout := s.timeout
	if timeout == 0 {
		timeout = DefaultCatchUpTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	delay := 100 * time.Millisecond
	var lastErr error
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
			s.logger.Warn("snapshot catch-up: peer failed", "peer", addr, "topic", req.Topic, "partition", req.Partition, "err", err)
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
		ref := SegmentRef{Topic: req.Topic, TopicIndex: req.TopicIndex, Partition: req.Partition, Base: seg.Base, Bytes: seg.Bytes}
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
