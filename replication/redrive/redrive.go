package redrive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// batchRecords bounds the records one batch reads; a rate makes batches
// smaller (about a tenth of a second of records), so a stop or a leader
// change waits for little.
const (
	batchRecords     = 200
	readBytes        = 1 << 20
	retryPause       = 200 * time.Millisecond
	loopPeriod       = 100 * time.Millisecond
	maxOverloadPause = 5 * time.Second
)

// IdempotencyKey is the idempotency key of the record a redrive writes
// for the dead letter at (topic, partition, offset).
func IdempotencyKey(topic string, partition int32, offset int64) string {
	return "logd-redrive/" + topic + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10)
}

// Start starts a redrive job: the dead-letter topic's end offsets now
// bound it; MaxRedrives 0 is backend.DefaultMaxRedrives. Errors:
// backend.ErrUnknownTopic (the dead-letter topic or the target),
// backend.ErrInvalidArgument (a bad bound or rate),
// *backend.FeatureLevelError before every member runs a build with
// redrive jobs (or, for a spec naming its records, with
// fsm.RedriveSelectLevel), and ProposeRedrive's.
func (r *Runner) Start(ctx context.Context, s fsm.RedriveSpec) (fsm.RedriveJob, error) {
	if s.MaxRedrives == 0 {
		s.MaxRedrives = backend.DefaultMaxRedrives
	}
	t, err := r.state.Topic(s.DeadLetterTopic)
	if err != nil {
		return fsm.RedriveJob{}, fmt.Errorf("redrive: dead-letter topic: %w", err)
	}
	if len(s.Records) > 0 {
		s.Records = fsm.SortRedriveRecords(s.Records)
	}
	s.Ends = make([]int64, len(t.Partitions))
	for i := range t.Partitions {
		o, err := r.node.Offsets(ctx, s.DeadLetterTopic, int32(i))
		if err != nil {
			return fsm.RedriveJob{}, fmt.Errorf("redrive: the end of %s-%d: %w", s.DeadLetterTopic, i, err)
		}
		s.Ends[i] = o.End
	}
	if err := r.state.ValidateRedriveSpec(s); err != nil {
		return fsm.RedriveJob{}, err
	}
	j, err := r.node.ProposeRedrive(ctx, fsm.Redrive{Op: fsm.RedriveStart, Spec: &s})
	if err == nil {
		r.wakeLoop()
	}
	return j, err
}

// Stop stops a running job (its worker stops after the batch in hand,
// which is committed); stopping an ended job changes nothing.
// backend.ErrUnknownRedrive for an id not kept.
func (r *Runner) Stop(ctx context.Context, id string) (fsm.RedriveJob, error) {
	if _, err := r.state.RedriveJob(id); err != nil {
		return fsm.RedriveJob{}, err
	}
	j, err := r.node.ProposeRedrive(ctx, fsm.Redrive{Op: fsm.RedriveStop, ID: id})
	if err == nil {
		r.wakeLoop()
	}
	return j, err
}

// Position returns a job's position: per dead-letter partition, the next
// offset it reads (its group's committed offset, 0 before any).
func (r *Runner) Position(j fsm.RedriveJob) []int64 {
	pos := make([]int64, len(j.Spec.Ends))
	g, err := r.state.ConsumerGroup(fsm.RedriveGroup(j.ID))
	if err != nil {
		return pos
	}
	if t, ok := g.Topics[j.Spec.DeadLetterTopic]; ok {
		for i, p := range t.Partitions {
			if i < len(pos) && p.Committed > 0 {
				pos[i] = p.Committed
			}
		}
	}
	return pos
}

func (r *Runner) wakeLoop() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run is the leader's redrive loop: while this node leads (its barrier
// applied), one worker per running job; none otherwise. It returns when
// ctx ends, after its workers. Call it once.
func (r *Runner) Run(ctx context.Context) {
	var (
		mu      sync.Mutex
		workers = map[string]context.CancelFunc{} // guarded by mu
		wg      sync.WaitGroup
	)
	defer func() {
		mu.Lock()
		for _, cancel := range workers {
			cancel()
		}
		mu.Unlock()
		wg.Wait()
	}()
	t := time.NewTicker(loopPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
		running := map[string]bool{}
		if r.node.Leads() {
			for _, j := range r.state.RedriveJobs() {
				if !j.Ended() {
					running[j.ID] = true
				}
			}
		}
		mu.Lock()
		for id, cancel := range workers {
			if !running[id] {
				cancel()
			}
		}
		for id := range running {
			if _, ok := workers[id]; ok {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			workers[id] = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(workers, id)
					mu.Unlock()
					cancel()
				}()
				r.work(wctx, id)
			}()
		}
		mu.Unlock()
	}
}

// work runs job id until it is done, fails, is stopped, or this node
// stops leading (ctx).
func (r *Runner) work(ctx context.Context, id string) {
	log := r.log.With("redrive", id)
	for ctx.Err() == nil {
		j, err := r.state.RedriveJob(id)
		if err != nil || j.Ended() {
			return
		}
		done, err := r.step(ctx, j)
		switch {
		case err == nil && !done:
			continue
		case err == nil:
			if _, err := r.node.ProposeRedrive(ctx, fsm.Redrive{Op: fsm.RedriveFinish, ID: id}); err == nil {
				log.Info("redrive done")
				return
			}
		case retryable(err):
			log.Debug("redrive step", "err", err)
		default:
			log.Warn("redrive failed", "err", err)
			if _, err := r.node.ProposeRedrive(ctx, fsm.Redrive{Op: fsm.RedriveFinish, ID: id, Error: publicError(err)}); err == nil {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryPause):
		}
	}
}

// retryable: errors after which the job goes on (on this node, or on the
// next leader), as opposed to those that fail it.
func retryable(err error) bool {
	return errors.Is(err, backend.ErrNotLeader) || errors.Is(err, backend.ErrTimeout) || errors.Is(err, backend.ErrShutdown) ||
		errors.Is(err, context.Canceled) || errors.Is(err, backend.ErrDedupRace) || errors.Is(err, backend.ErrStopped)
}

// publicError is an error's text without the package prefixes of its
// sentinels, for a job's error field.
func publicError(err error) string {
	return strings.ReplaceAll(err.Error(), "replication: ", "")
}

// filter is the part of a job's definition backend.RedriveMatch reads
// (reasons, key, time range), the selection the API's dead-letter list
// makes too (server/dlq_list.go); the offsets and the named records are
// the job's own (fsm.RedriveSpec.Selects).
func filter(s fsm.RedriveSpec) backend.RedriveSpec {
	return backend.RedriveSpec{Reasons: s.Reasons, Key: s.Key, HasKey: s.HasKey, SinceMs: s.SinceMs, UntilMs: s.UntilMs}
}

// step handles one batch of job j: reads from its position, produces what
// the filter selects, commits the position and counters. done: the job's
// position reached its end in every partition.
func (r *Runner) step(ctx context.Context, j fsm.RedriveJob) (done bool, err error) {
	s := j.Spec
	pos := r.Position(j)
	p := -1
	var from, end int64
	for i := range s.Ends {
		from = max(pos[i], s.FromOffset)
		end = s.Ends[i]
		if s.ToOffset > 0 {
			end = min(end, s.ToOffset)
		}
		if from < end {
			p = i
			break
		}
	}
	if p < 0 {
		return true, nil
	}
	part := int32(p)
	var delta fsm.RedriveProgress
	if len(s.Records) > 0 {
		// A job naming its records passes over the offsets between them
		// without reading them: scanned and skipped, as the filter would.
		to := end
		if next, ok := s.NextRecord(part, from); ok {
			to = min(next, end)
		}
		if to > from {
			delta.Scanned, delta.Skipped = to-from, to-from
			return false, r.advance(ctx, j, part, to, delta)
		}
	}
	limit := batchRecords
	if s.Rate > 0 {
		limit = max(1, min(batchRecords, int(s.Rate/10)))
	}
	rd, err := r.node.Read(s.DeadLetterTopic, part, max(from, 0), readBytes)
	var oor *backend.OutOfRangeError
	if errors.As(err, &oor) && from < oor.Start {
		// Retention removed dead letters before the job read them.
		skip := min(oor.Start, end) - from
		delta.Scanned, delta.Skipped = skip, skip
		return false, r.advance(ctx, j, part, from+skip, delta)
	}
	if err != nil {
		return false, fmt.Errorf("read %s-%d at %d: %w", s.DeadLetterTopic, part, from, err)
	}
	if from < rd.LogStartOffset {
		skip := min(rd.LogStartOffset, end) - from
		delta.Scanned, delta.Skipped = skip, skip
		return false, r.advance(ctx, j, part, from+skip, delta)
	}
	recs, err := batch.Records(rd.Batches, from, limit)
	if err != nil {
		return false, fmt.Errorf("decode %s-%d at %d: %w", s.DeadLetterTopic, part, from, err)
	}
	next := from
	match := filter(s)
	byTarget := map[string][]backend.ProduceRecord{}
	var targets []string
	for _, rec := range recs {
		if rec.Offset >= end {
			break
		}
		next = rec.Offset + 1
		delta.Scanned++
		d := backend.ParseDeadLetter(rec)
		switch {
		case !d.IsDeadLetter() || !s.Selects(part, rec.Offset) || !backend.RedriveMatch(match, d, rec.Key):
			// A record without a reason and an origin topic is no dead
			// letter, with a target too: ListDeadLetters (server/dlq_list.go)
			// lists what a job moves, and it leaves such records out.
			delta.Skipped++
			continue
		case d.Redrives >= s.MaxRedrives:
			delta.Refused++
			continue
		}
		target, out, ok := Record(s, part, rec, d)
		if !ok {
			// No origin to go back to: not a dead letter of a queue group.
			delta.Skipped++
			continue
		}
		if _, ok := byTarget[target]; !ok {
			targets = append(targets, target)
		}
		byTarget[target] = append(byTarget[target], out)
	}
	if next == from {
		// Nothing readable below end: the records up to end were removed
		// by compaction (offsets are kept, records not).
		skip := end - from
		if len(recs) > 0 && recs[0].Offset > from {
			skip = min(recs[0].Offset, end) - from
		}
		delta.Scanned, delta.Skipped = skip, skip
		return false, r.advance(ctx, j, part, from+skip, delta)
	}
	if len(recs) > 0 && recs[0].Offset > from {
		// A gap left by compaction before the first record.
		delta.Scanned += recs[0].Offset - from
		delta.Skipped += recs[0].Offset - from
	}
	start := time.Now()
	selected := 0
	for _, target := range targets {
		rs := byTarget[target]
		res, err := r.produce(ctx, target, rs)
		if err != nil {
			return false, fmt.Errorf("redrive to %s: %w", target, err)
		}
		for i, rr := range res.Results {
			if rr.Duplicate {
				delta.Duplicates++
				continue
			}
			delta.Redriven++
			delta.Bytes += int64(len(rs[i].Key) + len(rs[i].Value))
		}
		selected += len(rs)
	}
	if err := r.advance(ctx, j, part, next, delta); err != nil {
		return false, err
	}
	if s.Rate > 0 && selected > 0 {
		wait := time.Duration(float64(selected)/s.Rate*float64(time.Second)) - time.Since(start)
		if wait > 0 {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	return false, nil
}

// produce produces records to topic, waiting while admission control
// refuses them (a redrive must not add to an overload); the idempotency
// keys make each retry safe.
func (r *Runner) produce(ctx context.Context, topic string, rs []backend.ProduceRecord) (backend.ProduceResult, error) {
	for {
		res, err := r.node.Produce(ctx, backend.ProduceRequest{Topic: topic, Records: rs})
		var oe *backend.OverloadedError
		if !errors.As(err, &oe) {
			return res, err
		}
		wait := min(max(oe.RetryAfter, 100*time.Millisecond), maxOverloadPause)
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// advance commits job j's position in partition part (next, the next
// offset to read) with the counters of the batch that ends there, in one
// entry.
func (r *Runner) advance(ctx context.Context, j fsm.RedriveJob, part int32, next int64, delta fsm.RedriveProgress) error {
	_, err := r.node.ProposeRedrive(ctx, fsm.Redrive{Op: fsm.RedriveAdvance, ID: j.ID, Delta: delta,
		Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: j.Spec.DeadLetterTopic, Partition: part}, Offset: next}}})
	return err
}

// Record builds the record the dead letter r (at dlqPartition of the
// spec's dead-letter topic, d parsed from it) goes back as: its key, value
// and original headers, its history in the logd-redrive-history header
// (its next dead letter appends to it), its redrive count one more, and
// its original idempotency key kept in a header, with the idempotency key
// IdempotencyKey of the dead letter. It goes to its origin partition, or
// to the spec's target routed by key; false when the dead letter names no
// origin and the spec no target. The record depends on the dead letter and
// the spec alone, so a job that writes a batch again (after a leader
// change) writes the same payloads under the same keys.
func Record(s fsm.RedriveSpec, dlqPartition int32, r batch.Record, d backend.DeadLetter) (target string, rec backend.ProduceRecord, ok bool) {
	target = s.Target
	if target == "" {
		if !d.HasOrigin {
			return "", backend.ProduceRecord{}, false
		}
		target = d.OriginTopic
	}
	headers := make([]batch.Header, 0, len(r.Headers)+3)
	for _, h := range r.Headers {
		if h.Key == backend.RedriveHeaderCount || h.Key == backend.RedriveHeaderKey || h.Key == fsm.RedriveHeaderHistory || strings.HasPrefix(h.Key, "logd-dlq-") {
			continue
		}
		headers = append(headers, h)
	}
	if len(d.History) > 0 {
		headers = append(headers, batch.Header{Key: fsm.RedriveHeaderHistory, Value: d.History})
	}
	headers = append(headers, batch.Header{Key: backend.RedriveHeaderCount, Value: []byte(strconv.Itoa(d.Redrives + 1))})
	if orig := d.OriginalKey(); orig != "" {
		headers = append(headers, batch.Header{Key: backend.RedriveHeaderKey, Value: []byte(orig)})
	}
	rec = backend.ProduceRecord{Key: r.Key, Value: r.Value, Headers: headers,
		IdempotencyKey: IdempotencyKey(s.DeadLetterTopic, dlqPartition, r.Offset)}
	if s.Target == "" {
		rec.Partition, rec.HasPartition = d.OriginPartition, true
	}
	return target, rec, true
}
