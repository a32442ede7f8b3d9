package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxRedrives is RedriveOptions.MaxRedrives when zero.
const DefaultMaxRedrives = 3

// RedriveOptions says which dead letters to move back, and how fast.
type RedriveOptions struct {
	// DeadLetterTopic is read; records go back to their origin topic and
	// partition.
	DeadLetterTopic string
	Filter          DeadLetterFilter
	// Rate bounds the records redriven per second; 0 means no bound.
	Rate float64
	// DryRun lists what would be redriven and changes nothing (no records,
	// no position).
	DryRun bool
	// MaxRedrives is the loop guard: a record already redriven this many
	// times is refused (counted in Refused) and left where it is. Default
	// DefaultMaxRedrives.
	MaxRedrives int
	// Progress, if set, is called after each record with the records
	// handled so far and the total to handle.
	Progress func(done, total int64)
	// Each, if set, is called for each selected dead letter with what
	// happened to it: "redriven", "duplicate" (an earlier, interrupted run
	// had written it), "refused" (loop guard) or "dry-run".
	Each func(d DeadLetter, outcome string)
}

// RedriveResult counts what a redrive did.
type RedriveResult struct {
	// Position is the consumer group holding the resumable position.
	Position string `json:"position_group"`
	Selected int64  `json:"selected"`
	Redriven int64  `json:"redriven"`
	// Duplicates were written by an interrupted earlier run (the
	// idempotency key matched), and not written again.
	Duplicates int64 `json:"duplicates"`
	Refused    int64 `json:"refused"`
	// Skipped: records before the saved position (an earlier run handled
	// them) or not passing the filter.
	Skipped int64 `json:"skipped"`
}

// RedrivePositionGroup is the consumer group whose committed offsets on
// the dead-letter topic are a redrive's resumable position; the filter is
// part of the name, so a redrive with other filters keeps its own.
func RedrivePositionGroup(deadLetterTopic string, f DeadLetterFilter) string {
	return "logd-redrive." + deadLetterTopic + "." + f.id()
}

// Redrive moves selected dead letters back to their origin topic and
// partition, at most opts.Rate per second. Each redriven record keeps its
// key, value and original headers, gains RedriveCountHeader (one more than
// before) and, when it has one, its attempt history in RedriveHistoryHeader
// (the next dead letter appends to it); it is a new record, so its
// delivery count starts afresh.
//
// Interruption is safe: the position (the next dead-letter offset to
// handle, per partition) is saved as the committed offset of
// RedrivePositionGroup after each record, and each record is produced
// with an idempotency key derived from its identity and redrive count
// (RedriveIdempotencyKey), so a record written just before an interruption
// is answered as a duplicate when the next run reaches it again.
func (c *Client) Redrive(ctx context.Context, opts RedriveOptions) (RedriveResult, error) {
	if opts.MaxRedrives <= 0 {
		opts.MaxRedrives = DefaultMaxRedrives
	}
	if opts.Rate < 0 {
		return RedriveResult{}, fmt.Errorf("redrive: negative rate: %w", ErrInvalidArgument)
	}
	res := RedriveResult{Position: RedrivePositionGroup(opts.DeadLetterTopic, opts.Filter)}
	desc, err := c.DescribeTopic(ctx, opts.DeadLetterTopic)
	if err != nil {
		return res, err
	}
	pos, err := c.redrivePositions(ctx, res.Position, opts.DeadLetterTopic)
	if err != nil {
		return res, err
	}
	// First pass: count what there is to do, for the progress bar.
	var total int64
	for _, p := range desc.Partitions {
		from := max(pos[p.Partition], p.LogStart)
		res.Skipped += from - p.LogStart
		err := c.scanDeadLetters(ctx, opts.DeadLetterTopic, p.Partition, from, p.End, func(d DeadLetter) error {
			if opts.Filter.Match(d) {
				total++
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	var interval time.Duration
	if opts.Rate > 0 {
		interval = time.Duration(float64(time.Second) / opts.Rate)
	}
	next := time.Now()
	var done int64
	for _, p := range desc.Partitions {
		from := max(pos[p.Partition], p.LogStart)
		err := c.scanDeadLetters(ctx, opts.DeadLetterTopic, p.Partition, from, p.End, func(d DeadLetter) error {
			if !opts.Filter.Match(d) {
				res.Skipped++
				return nil
			}
			res.Selected++
			outcome := "dry-run"
			switch {
			case d.Redrives >= opts.MaxRedrives:
				outcome = "refused"
				res.Refused++
			case opts.DryRun:
			default:
				if interval > 0 {
					if err := sleepUntil(ctx, next); err != nil {
						return err
					}
					// No bursts after a slow call: at most one slot of credit.
					next = next.Add(interval)
					if now := time.Now(); next.Before(now.Add(-interval)) {
						next = now
					}
				}
				dup, err := c.redriveOne(ctx, d)
				if err != nil {
					return err
				}
				outcome = "redriven"
				if dup {
					outcome = "duplicate"
					res.Duplicates++
				} else {
					res.Redriven++
				}
			}
			if !opts.DryRun {
				if err := c.saveRedrivePosition(ctx, res.Position, d.Topic, d.Partition, d.Offset+1); err != nil {
					return err
				}
			}
			done++
			if opts.Each != nil {
				opts.Each(d, outcome)
			}
			if opts.Progress != nil {
				opts.Progress(done, total)
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("redrive %s-%d: %w", opts.DeadLetterTopic, p.Partition, err)
		}
	}
	return res, nil
}

// RedriveIdempotencyKey is the idempotency key of the n-th redrive of d:
// its original key (or its origin topic/partition/offset if it had none)
// and n. The original key itself cannot be reused while the topic's
// idempotency window remembers the original append (the redriven record
// carries another header, so it would be refused as a conflict); it is
// kept in RedriveKeyHeader.
func RedriveIdempotencyKey(d DeadLetter, n int) string {
	base := originalKey(d)
	if base == "" {
		base = fmt.Sprintf("%s/%d/%d", d.OriginTopic, d.OriginPartition, d.OriginOffset)
	}
	return base + "#redrive-" + strconv.Itoa(n)
}

// originalKey is the idempotency key the record was first produced with:
// kept in RedriveKeyHeader by an earlier redrive, else the dead-letter
// header's.
func originalKey(d DeadLetter) string {
	for _, h := range d.Headers {
		if h.Key == RedriveKeyHeader {
			return string(h.Value)
		}
	}
	return d.IdempotencyKey
}

// redriveOne produces one dead letter back to its origin, waiting while
// the origin refuses it as overloaded.
func (c *Client) redriveOne(ctx context.Context, d DeadLetter) (duplicate bool, err error) {
	n := d.Redrives + 1
	headers := make([]Header, 0, len(d.Headers)+2)
	for _, h := range d.Headers {
		if h.Key != RedriveCountHeader && h.Key != RedriveKeyHeader && h.Key != RedriveHistoryHeader && !strings.HasPrefix(h.Key, "logd-dlq-") {
			headers = append(headers, h)
		}
	}
	if len(d.HistoryJSON) > 0 {
		// Its next dead letter appends to this history.
		headers = append(headers, Header{Key: RedriveHistoryHeader, Value: d.HistoryJSON})
	}
	headers = append(headers, Header{Key: RedriveCountHeader, Value: []byte(strconv.Itoa(n))})
	if orig := originalKey(d); orig != "" {
		headers = append(headers, Header{Key: RedriveKeyHeader, Value: []byte(orig)})
	}
	part := d.OriginPartition
	rec := []Record{{Key: d.Key, Value: d.Value, Headers: headers, Partition: &part, IdempotencyKey: RedriveIdempotencyKey(d, n)}}
	for {
		rs, err := c.Produce(ctx, d.OriginTopic, rec)
		var oe *OverloadedError
		if errors.As(err, &oe) {
			// The origin's queue is full: redriving must not add to an
			// overload, so wait as told (beyond the client's retries) and
			// go on when there is room.
			if err := sleepUntil(ctx, time.Now().Add(max(oe.RetryAfter, 100*time.Millisecond))); err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, err
		}
		return len(rs) == 1 && rs[0].Duplicate, nil
	}
}

// redrivePositions reads a position group's committed offsets on topic;
// a missing group has none.
func (c *Client) redrivePositions(ctx context.Context, group, topic string) (map[int32]int64, error) {
	out := map[int32]int64{}
	g, err := c.DescribeGroup(ctx, group)
	if errors.Is(err, ErrUnknownGroup) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, p := range g.Partitions {
		if p.Topic == topic && p.Committed >= 0 {
			out[p.Partition] = p.Committed
		}
	}
	return out, nil
}

func (c *Client) saveRedrivePosition(ctx context.Context, group, topic string, partition int32, next int64) error {
	_, err := c.ResetGroupOffsets(ctx, ResetOffsetsRequest{Group: group, Strategy: ResetExplicit, Execute: true,
		Topics:  map[string][]int32{topic: {partition}},
		Offsets: []PlannedReset{{Topic: topic, Partition: partition, New: next}}})
	return err
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
