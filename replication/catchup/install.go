package catchup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
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
// peer streams each file; neither side holds more than one batch (and a
// read buffer of stageReadBytes) in memory. The data's reads are paced by
// the node's move budget (throttle.go), and the time they wait for it is
// not counted against the timeout; the node closing ends an install at
// once, waiting or not.
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

// FetcherOptions configure NewSegmentFetcher; the zero value is a fetcher
// with the default timeout, slog.Default(), no budget and nothing that
// stops it early.
type FetcherOptions struct {
	// Timeout bounds one install's copying and retrying, not counting
	// the time its reads waited for Throttle: a paced copy of a large
	// partition is slow by design, the timeout is for peers that do not
	// serve. 0: DefaultCatchUpTimeout.
	Timeout time.Duration
	// Logger receives peers' failures; nil: slog.Default().
	Logger *slog.Logger
	// Throttle, if set, paces the segment data read from peers (the
	// node's move budget, throttle.go); share one among every fetcher of
	// a node.
	Throttle *Throttle
	// Stop, if set, ends an install in progress once closed (the node
	// closing), waiting for the budget included: Raft's shutdown waits
	// for the state machine's Restore, which waits for the fetch.
	Stop <-chan struct{}
}

// segmentFetcher implements fsm.SegmentFetcher over a SegmentSource.
type segmentFetcher struct {
	source SegmentSource
	opts   FetcherOptions // Timeout and Logger set
}

// NewSegmentFetcher returns a state machine's fetcher
// (fsm.Config.Fetcher): it copies segments from peers through source as
// opts say. Without a source it returns nil: the state machine then
// refuses a snapshot ahead of its data. It starts nothing.
func NewSegmentFetcher(source SegmentSource, opts FetcherOptions) fsm.SegmentFetcher {
	if source == nil {
		return nil
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultCatchUpTimeout
	}
	return &segmentFetcher{source: source, opts: opts}
}

// errFetchTimeout and errStopped end a fetch's context: its time ran out,
// or FetcherOptions.Stop was closed.
var (
	errFetchTimeout = errors.New("catch-up timed out")
	errStopped      = errors.New("the node is closing")
)

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
	timeout := s.opts.Timeout
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	dl := startDeadline(timeout, func() { cancel(errFetchTimeout) })
	defer dl.stop()
	if stop := s.opts.Stop; stop != nil {
		// Ends with the fetch at the latest (the deferred cancel).
		go func() {
			select {
			case <-stop:
				cancel(errStopped)
			case <-ctx.Done():
			}
		}()
	}
	delay := 100 * time.Millisecond
	var (
		lastErr, goneErr error
		failures         int // since the last warning
		lastWarn         time.Time
	)
	ended := func() error {
		if errors.Is(context.Cause(ctx), errStopped) {
			return fmt.Errorf("snapshot catch-up stopped: %w (last: %v)", errStopped, lastErr)
		}
		if waited := dl.extended(); waited > 0 {
			return fmt.Errorf("no peer served the segments within %v (besides %v waiting for the move budget): %w",
				timeout, waited.Round(time.Millisecond), lastErr)
		}
		return fmt.Errorf("no peer served the segments within %v: %w", timeout, lastErr)
	}
	for {
		for _, addr := range req.Peers {
			err := s.stageFrom(ctx, addr, req, dl)
			if err == nil {
				bases := make([]int64, len(req.Segments))
				for i, seg := range req.Segments {
					bases[i] = seg.Base
				}
				// A local I/O error: retrying elsewhere will not help.
				return log.InstallStaged(req.Dir, req.Log, req.Keep, bases)
			}
			lastErr = err
			if ctx.Err() != nil {
				// Not the peer's failure: the next would fail alike.
				return ended()
			}
			if errors.Is(err, backend.ErrSegmentGone) {
				goneErr = err
			}
			failures++
			if time.Since(lastWarn) >= catchUpLogEvery {
				s.opts.Logger.Warn("snapshot catch-up: peer failed", "peer", addr, "topic", req.Topic, "partition", req.Partition,
					"failures", failures, "err", err)
				lastWarn, failures = time.Now(), 0
			} else {
				s.opts.Logger.Debug("snapshot catch-up: peer failed", "peer", addr, "topic", req.Topic, "partition", req.Partition, "err", err)
			}
		}
		if goneErr != nil {
			return fmt.Errorf("snapshot lists segments its peers no longer hold: %w", goneErr)
		}
		select {
		case <-ctx.Done():
			return ended()
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// stageFrom stages every segment req lists from the peer at addr; the
// data's reads are paced by the move budget, and clock is told of each
// wait for it.
func (s *segmentFetcher) stageFrom(ctx context.Context, addr string, req fsm.FetchRequest, clock waitClock) error {
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
		// StageSegment reads a batch's length prefix, then the batch: the
		// buffer hands the throttle reads of many batches at once.
		data := bufio.NewReaderSize(s.opts.Throttle.reader(ctx, rc, clock), stageReadBytes)
		err = log.StageSegment(req.Dir, req.Log, log.SegmentInfo{BaseOffset: seg.Base, EndOffset: seg.End, Bytes: seg.Bytes}, meta, data)
		rc.Close()
		if err != nil {
			return fmt.Errorf("segment %d: %w", seg.Base, err)
		}
	}
	return nil
}

// stageReadBytes is the size of the reads a fetch asks of a peer's stream.
const stageReadBytes = 64 << 10

// deadline cancels a fetch once its timeout has passed, not counting the
// time the fetch waited for the move budget: it does not run out while a
// wait lasts, and each wait moves it by its length. It is the fetch's
// waitClock.
type deadline struct {
	cancel  func()
	mu      sync.Mutex
	end     time.Time     // guarded by mu
	added   time.Duration // guarded by mu: waited so far
	waiting int           // guarded by mu: waits in progress
	timer   *time.Timer   // guarded by mu
	stopped bool          // guarded by mu
}

// startDeadline calls cancel once timeout has passed, not counting
// waits; stop ends it.
func startDeadline(timeout time.Duration, cancel func()) *deadline {
	d := &deadline{cancel: cancel}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.end = time.Now().Add(timeout)
	d.timer = time.AfterFunc(timeout, d.fire)
	return d
}

func (d *deadline) fire() {
	d.mu.Lock()
	if d.stopped || d.waiting > 0 {
		// waitEnd sets the timer again.
		d.mu.Unlock()
		return
	}
	if left := time.Until(d.end); left > 0 {
		d.timer.Reset(left)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	d.cancel()
}

func (d *deadline) waitStart() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waiting++
}

func (d *deadline) waitEnd(waited time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waiting--
	d.end = d.end.Add(waited)
	d.added += waited
	if !d.stopped && d.waiting == 0 {
		d.timer.Reset(max(time.Until(d.end), 0))
	}
}

// extended returns the time the fetch waited for the budget.
func (d *deadline) extended() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.added
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	d.timer.Stop()
}
