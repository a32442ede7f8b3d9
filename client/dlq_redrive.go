package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// DefaultMaxRedrives is RedriveOptions.MaxRedrives when zero (the server's
// default).
const DefaultMaxRedrives = 3

// Redrive job states (RedriveJob.State).
const (
	RedriveRunning = "running"
	RedriveStopped = "stopped"
	RedriveDone    = "done"
	RedriveFailed  = "failed"
)

// RedriveOptions says which dead letters a redrive job moves back, where,
// and how fast.
type RedriveOptions struct {
	// DeadLetterTopic is read.
	DeadLetterTopic string `json:"dead_letter_topic"`
	// Target, if set, receives every record, routed by key; empty: each
	// record goes back to its origin topic and partition.
	Target string `json:"target,omitempty"`
	// Filter selects by reason, key and dead-lettering time.
	Filter DeadLetterFilter `json:"filter"`
	// FromOffset and ToOffset bound the dead-letter offsets of every
	// partition, [From, To); ToOffset 0 is unbounded.
	FromOffset int64 `json:"from_offset,omitempty"`
	ToOffset   int64 `json:"to_offset,omitempty"`
	// Rate bounds the records redriven per second; 0 means no bound.
	Rate float64 `json:"rate,omitempty"`
	// MaxRedrives is the loop guard: a record already redriven this many
	// times is refused (counted, left where it is). 0 is
	// DefaultMaxRedrives.
	MaxRedrives int `json:"max_redrives,omitempty"`
	// Records, when set, names the dead letters the job may move (the
	// filter still applies to them; at most 10,000); empty: every dead
	// letter the filter selects. It needs feature level 9 on every node.
	Records []DeadLetterRef `json:"records,omitempty"`
}

// DeadLetterRef names one dead letter by its place in the dead-letter
// topic.
type DeadLetterRef struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// RedriveProgress counts what a job did: each scanned dead letter was
// redriven, a duplicate (written before, by an interrupted batch or an
// earlier job, and not again), refused by the loop guard, or skipped by
// the filter.
type RedriveProgress struct {
	Scanned    int64 `json:"scanned"`
	Redriven   int64 `json:"redriven"`
	Duplicates int64 `json:"duplicates"`
	Refused    int64 `json:"refused"`
	Skipped    int64 `json:"skipped"`
	// Bytes of keys and values redriven.
	Bytes int64 `json:"bytes"`
}

// RedriveJob is a redrive job as the cluster keeps it.
type RedriveJob struct {
	ID string `json:"id"`
	// State is RedriveRunning, RedriveStopped, RedriveDone or
	// RedriveFailed; Error says why a job failed.
	State    string          `json:"state"`
	Error    string          `json:"error,omitempty"`
	Options  RedriveOptions  `json:"options"`
	Progress RedriveProgress `json:"progress"`
	// Position is, per dead-letter partition, the next offset the job
	// reads; EndOffsets where it stops (the ends when it started); Total
	// the records in between at the start.
	Position   []int64 `json:"position"`
	EndOffsets []int64 `json:"end_offsets"`
	Total      int64   `json:"total"`
	// PositionGroup is the internal consumer group holding Position.
	PositionGroup string    `json:"position_group"`
	Principal     string    `json:"principal,omitempty"`
	Created       time.Time `json:"created"`
	Updated       time.Time `json:"updated"`
}

// Ended reports whether the job runs no more.
func (j RedriveJob) Ended() bool { return j.State != RedriveRunning }

// StartRedrive starts a redrive job, run by the leader (and by the next
// one after a leader change, from the last batch it committed): each
// selected dead letter goes back with its key, value and original
// headers, a logd-redrive-count header one more than before, its attempt
// history in logd-redrive-history, and an idempotency key derived from
// the dead letter, so no record is written twice. The job stops at the
// dead-letter topic's end offsets as they were when it started. Errors:
// ErrUnknownTopic, ErrInvalidArgument (a negative rate, an empty range).
func (c *Client) StartRedrive(ctx context.Context, o RedriveOptions) (RedriveJob, error) {
	if o.Rate < 0 {
		return RedriveJob{}, fmt.Errorf("start redrive: negative rate: %w", ErrInvalidArgument)
	}
	m := &logdv1.StartRedriveRequest{DeadLetterTopic: o.DeadLetterTopic, Target: o.Target, Reasons: o.Filter.Reasons,
		FromOffset: o.FromOffset, ToOffset: o.ToOffset, Rate: o.Rate, MaxRedrives: int32(o.MaxRedrives)}
	for _, r := range o.Records {
		m.Records = append(m.Records, &logdv1.RedriveRecordRef{Partition: r.Partition, Offset: r.Offset})
	}
	if o.Filter.Key != "" {
		m.Key, m.HasKey = []byte(o.Filter.Key), true
	}
	if !o.Filter.Since.IsZero() {
		m.SinceMs = o.Filter.Since.UnixMilli()
	}
	if !o.Filter.Until.IsZero() {
		m.UntilMs = o.Filter.Until.UnixMilli()
	}
	var out RedriveJob
	// Not retried: a retry after an unknown outcome could start a second
	// job (harmless to the records, whose keys dedupe, but confusing).
	err := c.do(ctx, "StartRedrive", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.StartRedrive(ctx, connect.NewRequest(m))
		if err != nil {
			return fromRPC(err)
		}
		out = redriveJobFrom(resp.Msg.Job)
		return nil
	})
	if err != nil {
		return RedriveJob{}, fmt.Errorf("start redrive of %s: %w", o.DeadLetterTopic, err)
	}
	return out, nil
}

// DescribeRedrive returns a job with its progress; ErrUnknownRedrive for
// an id the cluster does not keep.
func (c *Client) DescribeRedrive(ctx context.Context, id string) (RedriveJob, error) {
	var out RedriveJob
	err := c.do(ctx, "DescribeRedrive", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.DescribeRedrive(ctx, connect.NewRequest(&logdv1.DescribeRedriveRequest{Id: id}))
		if err != nil {
			return fromRPC(err)
		}
		out = redriveJobFrom(resp.Msg.Job)
		return nil
	})
	if err != nil {
		return RedriveJob{}, fmt.Errorf("describe redrive %s: %w", id, err)
	}
	return out, nil
}

// ListRedrives lists the jobs kept (running ones and the latest ended),
// oldest first; with deadLetterTopic set, that topic's only.
func (c *Client) ListRedrives(ctx context.Context, deadLetterTopic string) ([]RedriveJob, error) {
	var out []RedriveJob
	err := c.do(ctx, "ListRedrives", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListRedrives(ctx, connect.NewRequest(&logdv1.ListRedrivesRequest{DeadLetterTopic: deadLetterTopic}))
		if err != nil {
			return fromRPC(err)
		}
		out = make([]RedriveJob, 0, len(resp.Msg.Jobs))
		for _, j := range resp.Msg.Jobs {
			out = append(out, redriveJobFrom(j))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list redrives: %w", err)
	}
	return out, nil
}

// StopRedrive stops a running job after the batch in hand; an ended job
// is returned as it is. ErrUnknownRedrive for an id not kept.
func (c *Client) StopRedrive(ctx context.Context, id string) (RedriveJob, error) {
	var out RedriveJob
	err := c.do(ctx, "StopRedrive", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.StopRedrive(ctx, connect.NewRequest(&logdv1.StopRedriveRequest{Id: id}))
		if err != nil {
			return fromRPC(err)
		}
		out = redriveJobFrom(resp.Msg.Job)
		return nil
	})
	if err != nil {
		return RedriveJob{}, fmt.Errorf("stop redrive %s: %w", id, err)
	}
	return out, nil
}

// WaitRedrive polls a job every interval (default 200 ms) until it ends
// or ctx does, calling progress, if set, with each state seen.
func (c *Client) WaitRedrive(ctx context.Context, id string, interval time.Duration, progress func(RedriveJob)) (RedriveJob, error) {
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		j, err := c.DescribeRedrive(ctx, id)
		if err != nil {
			return j, err
		}
		if progress != nil {
			progress(j)
		}
		if j.Ended() {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-t.C:
		}
	}
}

func redriveJobFrom(j *logdv1.RedriveJob) RedriveJob {
	sp, p := j.GetSpec(), j.GetProgress()
	o := RedriveOptions{DeadLetterTopic: sp.GetDeadLetterTopic(), Target: sp.GetTarget(), FromOffset: sp.GetFromOffset(), ToOffset: sp.GetToOffset(),
		Rate: sp.GetRate(), MaxRedrives: int(sp.GetMaxRedrives()), Filter: DeadLetterFilter{Reasons: sp.GetReasons()}}
	if sp.GetHasKey() {
		o.Filter.Key = string(sp.GetKey())
	}
	for _, r := range sp.GetRecords() {
		o.Records = append(o.Records, DeadLetterRef{Partition: r.GetPartition(), Offset: r.GetOffset()})
	}
	if ms := sp.GetSinceMs(); ms > 0 {
		o.Filter.Since = time.UnixMilli(ms)
	}
	if ms := sp.GetUntilMs(); ms > 0 {
		o.Filter.Until = time.UnixMilli(ms)
	}
	return RedriveJob{ID: j.GetId(), State: j.GetState(), Error: j.GetError(), Options: o,
		Progress: RedriveProgress{Scanned: p.GetScanned(), Redriven: p.GetRedriven(), Duplicates: p.GetDuplicates(), Refused: p.GetRefused(),
			Skipped: p.GetSkipped(), Bytes: p.GetBytes()},
		Position: j.GetPosition(), EndOffsets: j.GetEndOffsets(), Total: j.GetTotal(), PositionGroup: j.GetPositionGroup(), Principal: j.GetPrincipal(),
		Created: time.UnixMilli(j.GetCreatedMs()), Updated: time.UnixMilli(j.GetUpdatedMs())}
}
