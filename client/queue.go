package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// QueueGroupConfig is a queue group's settings. In CreateQueueGroup a zero
// field takes the server's default; in AlterQueueGroup only non-zero fields
// change. Durations have millisecond precision.
type QueueGroupConfig struct {
	// Lease of a claim that names none (default 30 s).
	Lease time.Duration `json:"lease_ms"`
	// MaxDeliveries: a record failing this many deliveries is dead-lettered
	// (default 5).
	MaxDeliveries int `json:"max_deliveries"`
	// BackoffBase and BackoffMax shape the delay after a transient nack:
	// uniform in [0, min(BackoffMax, BackoffBase·2^(n-1))] (defaults 1 s,
	// 5 min).
	BackoffBase time.Duration `json:"backoff_base_ms"`
	BackoffMax  time.Duration `json:"backoff_max_ms"`
	// MaxInFlight bounds, per partition, records delivered and not finished
	// (default 1000).
	MaxInFlight int `json:"max_in_flight"`
	// AgeLimit dead-letters records older than this (reason "expired").
	// Zero means none in a create and "unchanged" in an alter; a negative
	// value removes the limit in an alter.
	AgeLimit time.Duration `json:"age_limit_ms"`
	// DeadLetterTopic (default "<topic>.<group>.dlq", created when missing).
	DeadLetterTopic string `json:"dead_letter_topic"`
	// DeadlineHeader names the header with a record's business deadline
	// (RFC 3339 or Unix ms); default "deadline", "-" for none.
	DeadlineHeader string `json:"deadline_header"`
}

func (c QueueGroupConfig) proto() *logdv1.QueueGroupConfig {
	out := &logdv1.QueueGroupConfig{}
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	if c.Lease != 0 {
		out.LeaseMs = ms(c.Lease)
	}
	if c.MaxDeliveries != 0 {
		v := int32(c.MaxDeliveries)
		out.MaxDeliveries = &v
	}
	if c.BackoffBase != 0 {
		out.BackoffBaseMs = ms(c.BackoffBase)
	}
	if c.BackoffMax != 0 {
		out.BackoffMaxMs = ms(c.BackoffMax)
	}
	if c.MaxInFlight != 0 {
		v := int32(c.MaxInFlight)
		out.MaxInFlight = &v
	}
	if c.AgeLimit != 0 {
		out.AgeLimitMs = ms(max(c.AgeLimit, 0))
	}
	if c.DeadLetterTopic != "" {
		out.DeadLetterTopic = &c.DeadLetterTopic
	}
	if c.DeadlineHeader != "" {
		out.DeadlineHeader = &c.DeadlineHeader
	}
	return out
}

func queueConfigFrom(p *logdv1.QueueGroupConfig) QueueGroupConfig {
	d := func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
	return QueueGroupConfig{
		Lease: d(p.GetLeaseMs()), MaxDeliveries: int(p.GetMaxDeliveries()), BackoffBase: d(p.GetBackoffBaseMs()),
		BackoffMax: d(p.GetBackoffMaxMs()), MaxInFlight: int(p.GetMaxInFlight()), AgeLimit: d(p.GetAgeLimitMs()),
		DeadLetterTopic: p.GetDeadLetterTopic(), DeadlineHeader: p.GetDeadlineHeader(),
	}
}

// CreateQueueGroup creates a queue group on a topic and returns its
// effective settings. With fromEnd it works only records appended from now
// on; otherwise every record of the topic. Retried only when nothing was
// written.
func (c *Client) CreateQueueGroup(ctx context.Context, topic, group string, cfg QueueGroupConfig, fromEnd bool) (QueueGroupConfig, error) {
	req := &logdv1.CreateQueueGroupRequest{Topic: topic, Group: group, Config: cfg.proto(), FromEnd: fromEnd}
	var out QueueGroupConfig
	err := c.do(ctx, "CreateQueueGroup", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.CreateQueueGroup(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out = queueConfigFrom(resp.Msg.GetConfig())
		return nil
	})
	if err != nil {
		return QueueGroupConfig{}, fmt.Errorf("create queue group %s/%s: %w", topic, group, err)
	}
	return out, nil
}

// AlterQueueGroup changes the non-zero settings of change and returns the
// group's effective settings.
func (c *Client) AlterQueueGroup(ctx context.Context, topic, group string, change QueueGroupConfig) (QueueGroupConfig, error) {
	req := &logdv1.AlterQueueGroupRequest{Topic: topic, Group: group, Config: change.proto()}
	var out QueueGroupConfig
	err := c.do(ctx, "AlterQueueGroup", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.AlterQueueGroup(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out = queueConfigFrom(resp.Msg.GetConfig())
		return nil
	})
	if err != nil {
		return QueueGroupConfig{}, fmt.Errorf("alter queue group %s/%s: %w", topic, group, err)
	}
	return out, nil
}

// QueueGroupDescription is a queue group's state.
type QueueGroupDescription struct {
	Topic      string                `json:"topic"`
	Group      string                `json:"group"`
	Config     QueueGroupConfig      `json:"config"`
	Created    time.Time             `json:"created"`
	Partitions []QueuePartitionState `json:"partitions"`
	// Paused: the group delivers nothing (PauseQueueGroup).
	Paused bool `json:"paused"`
	// AdmissionRefusals counts produces the answering node refused as
	// overloaded for this group since it started.
	AdmissionRefusals int64 `json:"admission_refusals"`
	// DeadLetterRecords is the record count of the dead-letter topic.
	DeadLetterRecords int64 `json:"dead_letter_records"`
	// BacklogRecords and BacklogBytes are the group's unfinished records
	// and the sum of their sizes (key, value, header keys and values) as
	// admission control counts them; BacklogBytesExact is false while the
	// bytes are an estimate (before every node runs a build of feature
	// level 6).
	BacklogRecords    int64 `json:"backlog_records"`
	BacklogBytes      int64 `json:"backlog_bytes"`
	BacklogBytesExact bool  `json:"backlog_bytes_exact"`
	// DrainPerSec is the records finished (acked or dead-lettered) per
	// second over the last 10 s or more, from the replicated counters.
	DrainPerSec float64 `json:"drain_per_sec"`
	// OldestUnfinishedAge is the time since the oldest unfinished record
	// was appended (0 when none or not known); MaxBacklogAge the topic's
	// queue.max.backlog.age.ms, negative when unbounded.
	OldestUnfinishedAge time.Duration `json:"oldest_unfinished_age_ms"`
	MaxBacklogAge       time.Duration `json:"max_backlog_age_ms"`
	// InFlight lists the records in flight, by partition and offset, when
	// asked for (DescribeQueueGroupInFlight).
	InFlight []InFlightRecord `json:"in_flight,omitempty"`
}

// InFlightRecord is one record under a live lease.
type InFlightRecord struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Worker is the worker id its claim named ("" for none).
	Worker string `json:"worker"`
	// Delivery is this delivery's number (1 for the first), Delivered
	// when it was claimed.
	Delivery  int       `json:"delivery"`
	Delivered time.Time `json:"delivered"`
	// LeaseDeadline is when the lease ends unless extended; Extensions
	// counts its extends.
	LeaseDeadline time.Time `json:"lease_deadline"`
	Extensions    int       `json:"extensions"`
}

// QueuePartitionState is one partition of a queue group.
type QueuePartitionState struct {
	Partition int32 `json:"partition"`
	// DoneOffset: every offset below it is finished. NextOffset: offsets at
	// or above it were never delivered.
	DoneOffset int64 `json:"done_offset"`
	NextOffset int64 `json:"next_offset"`
	EndOffset  int64 `json:"end_offset"`
	Ready      int64 `json:"ready"`
	InFlight   int64 `json:"in_flight"`
	Delayed    int64 `json:"delayed"`
	// DeadPending: decided for the dead-letter topic, not yet moved.
	DeadPending  int64 `json:"dead_pending"`
	Acked        int64 `json:"acked"`
	DeadLettered int64 `json:"dead_lettered"`
	// AtCap: records are waiting but the in-flight cap is reached.
	AtCap          bool          `json:"at_cap"`
	OldestReadyAge time.Duration `json:"oldest_ready_age_ms"`
	QueueHealth
}

// DescribeQueueGroup returns a queue group's settings and per-partition
// state.
func (c *Client) DescribeQueueGroup(ctx context.Context, topic, group string) (QueueGroupDescription, error) {
	return c.describeQueueGroup(ctx, topic, group, false)
}

// DescribeQueueGroupInFlight is DescribeQueueGroup with the list of the
// records in flight (InFlight): worker, delivery and lease deadline.
func (c *Client) DescribeQueueGroupInFlight(ctx context.Context, topic, group string) (QueueGroupDescription, error) {
	return c.describeQueueGroup(ctx, topic, group, true)
}

func (c *Client) describeQueueGroup(ctx context.Context, topic, group string, inFlight bool) (QueueGroupDescription, error) {
	var out QueueGroupDescription
	err := c.do(ctx, "DescribeQueueGroup", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: topic, Group: group, InFlight: inFlight}))
		if err != nil {
			return fromRPC(err)
		}
		out = queueGroupFrom(resp.Msg)
		return nil
	})
	if err != nil {
		return QueueGroupDescription{}, fmt.Errorf("describe queue group %s/%s: %w", topic, group, err)
	}
	return out, nil
}

// ListQueueGroups lists the queue groups of topic (of every topic when
// topic is empty), sorted by topic, then group, each as
// DescribeQueueGroup answers it.
func (c *Client) ListQueueGroups(ctx context.Context, topic string) ([]QueueGroupDescription, error) {
	var out []QueueGroupDescription
	err := c.do(ctx, "ListQueueGroups", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListQueueGroups(ctx, connect.NewRequest(&logdv1.ListQueueGroupsRequest{Topic: topic}))
		if err != nil {
			return fromRPC(err)
		}
		out = make([]QueueGroupDescription, 0, len(resp.Msg.Groups))
		for _, m := range resp.Msg.Groups {
			out = append(out, queueGroupFrom(m))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list queue groups: %w", err)
	}
	return out, nil
}

// queueGroupFrom converts a DescribeQueueGroup answer.
func queueGroupFrom(m *logdv1.DescribeQueueGroupResponse) QueueGroupDescription {
	out := QueueGroupDescription{Topic: m.Topic, Group: m.Group, Config: queueConfigFrom(m.Config), Created: msToTime(m.CreatedMs)}
	for _, p := range m.Partitions {
		out.Partitions = append(out.Partitions, QueuePartitionState{
			Partition: p.Partition, DoneOffset: p.DoneOffset, NextOffset: p.NextOffset, EndOffset: p.EndOffset,
			Ready: p.Ready, InFlight: p.InFlight, Delayed: p.Delayed, DeadPending: p.DeadPending,
			Acked: p.Acked, DeadLettered: p.DeadLettered, AtCap: p.AtCap,
			OldestReadyAge: time.Duration(p.OldestReadyAgeMs) * time.Millisecond,
			QueueHealth:    queueHealthFrom(p),
		})
	}
	out.Paused, out.AdmissionRefusals, out.DeadLetterRecords = m.Paused, m.AdmissionRefusals, m.DeadLetterRecords
	out.BacklogRecords, out.BacklogBytes, out.BacklogBytesExact, out.DrainPerSec = m.BacklogRecords, m.BacklogBytes, m.BacklogBytesExact, m.DrainPerSec
	out.OldestUnfinishedAge = time.Duration(m.OldestUnfinishedAgeMs) * time.Millisecond
	out.MaxBacklogAge = time.Duration(m.MaxBacklogAgeMs) * time.Millisecond
	for _, r := range m.InFlight {
		out.InFlight = append(out.InFlight, InFlightRecord{Partition: r.Partition, Offset: r.Offset, Worker: r.Worker, Delivery: int(r.Delivery),
			Delivered: msToTime(r.DeliveredMs), LeaseDeadline: msToTime(r.LeaseUntilMs), Extensions: int(r.Extensions)})
	}
	return out
}

// ClaimRequest asks for records of a queue group.
type ClaimRequest struct {
	Topic string
	Group string
	// MaxRecords bounds the records (1 to 10000; 0 means 1).
	MaxRecords int
	// Lease of each delivery; 0 means the group's.
	Lease time.Duration
	// MaxBytes bounds key+value+header bytes; 0 means the server's 4 MiB.
	MaxBytes int
	// MaxWait is how long to wait when nothing is claimable; 0 returns at
	// once.
	MaxWait time.Duration
	// Worker names the claiming worker (at most 128 bytes): describe's
	// in-flight list and each attempt's history in the dead letter show
	// it. Empty for none. A cluster with a node of a build before feature
	// level 6 drops it.
	Worker string
}

// Job is one delivery of a record.
type Job struct {
	Topic     string    `json:"topic"`
	Group     string    `json:"group"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
	Key       []byte    `json:"key"`
	Value     []byte    `json:"value"`
	Headers   []Header  `json:"headers,omitempty"`
	// Token names this delivery for Ack, Nack and Extend.
	Token string `json:"token"`
	// Delivery is 1 for the first delivery of the record.
	Delivery      int       `json:"delivery"`
	LeaseDeadline time.Time `json:"lease_deadline"`
	FirstDelivery time.Time `json:"first_delivery"`
}

// ClaimResult is what a claim delivered.
type ClaimResult struct {
	Jobs []Job
	// AtCap lists partitions whose in-flight cap kept waiting records back.
	AtCap []int32
	// DeadLettered counts records the claim moved to the dead-letter topic.
	DeadLettered int
	// Paused: the group is paused and delivers nothing until resumed.
	Paused bool
}

// Claim leases records to the caller. It is retried only after failures
// where nothing was written: a claim that timed out may have leased
// records, which come back when their leases expire.
func (c *Client) Claim(ctx context.Context, r ClaimRequest) (ClaimResult, error) {
	req := &logdv1.ClaimRequest{Topic: r.Topic, Group: r.Group, MaxRecords: int32(r.MaxRecords), LeaseMs: r.Lease.Milliseconds(),
		MaxBytes: int32(r.MaxBytes), MaxWaitMs: int32(r.MaxWait.Milliseconds()), Worker: r.Worker}
	var out ClaimResult
	err := c.do(ctx, "Claim", retryUnwritten, c.opts.Timeout+r.MaxWait, func(ctx context.Context) error {
		resp, err := c.rpc.Claim(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		m := resp.Msg
		out = ClaimResult{AtCap: m.AtCapPartitions, DeadLettered: int(m.DeadLettered), Jobs: make([]Job, len(m.Records)), Paused: m.Paused}
		for i, rec := range m.Records {
			j := Job{Topic: r.Topic, Group: r.Group, Partition: rec.Partition, Offset: rec.Offset, Timestamp: msToTime(rec.TimestampMs),
				Key: rec.Key, Value: rec.Value, Token: rec.Token, Delivery: int(rec.DeliveryCount),
				LeaseDeadline: msToTime(rec.LeaseDeadlineMs), FirstDelivery: msToTime(rec.FirstDeliveryMs)}
			for _, h := range rec.Headers {
				j.Headers = append(j.Headers, Header{Key: h.Key, Value: h.Value})
			}
			out.Jobs[i] = j
		}
		return nil
	})
	if err != nil {
		return ClaimResult{}, fmt.Errorf("claim %s/%s: %w", r.Topic, r.Group, err)
	}
	return out, nil
}

// Header returns the value of the job's first header named key.
func (j *Job) Header(key string) ([]byte, bool) {
	for _, h := range j.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// TokenResult is the outcome of one token of an Ack, Nack or Extend.
type TokenResult struct {
	Token string `json:"token"`
	// Err is nil when the token was accepted; it wraps ErrStaleToken for
	// an older delivery or an expired lease (nothing changed), or
	// ErrInvalidArgument for a malformed token.
	Err error `json:"-"`
	// Duplicate: the delivery was already finished by this token.
	Duplicate bool `json:"duplicate,omitempty"`
	// DeadLettered: a nack moved the record to the dead-letter topic.
	DeadLettered bool `json:"dead_lettered,omitempty"`
	// AvailableAt: a transient nack's record is offered again then.
	AvailableAt time.Time `json:"available_at,omitzero"`
	// LeaseDeadline: an extend's new deadline.
	LeaseDeadline time.Time `json:"lease_deadline,omitzero"`
}

func tokenResults(rs []*logdv1.TokenResult) ([]TokenResult, error) {
	out := make([]TokenResult, len(rs))
	var refused map[string]error
	for i, r := range rs {
		tr := TokenResult{Token: r.Token, Duplicate: r.Duplicate, DeadLettered: r.DeadLettered,
			AvailableAt: msToTime(r.AvailableAtMs), LeaseDeadline: msToTime(r.LeaseDeadlineMs)}
		if r.Error != logdv1.Reason_REASON_UNSPECIFIED {
			sentinel := reasonSentinel(r.Error)
			if sentinel == nil {
				sentinel = errors.New(r.Error.String())
			}
			tr.Err = &serverError{sentinel: sentinel, msg: r.Message}
			if refused == nil {
				refused = map[string]error{}
			}
			refused[r.Token] = tr.Err
		}
		out[i] = tr
	}
	if refused != nil {
		return out, &TokenError{Refused: refused}
	}
	return out, nil
}

// Ack finishes deliveries. The results are in token order; when some tokens
// were refused and others accepted the error is a *TokenError; when all
// were stale the call fails with ErrStaleToken. A repeated ack of the same
// delivery is accepted and marked Duplicate, so Ack is retried after any
// retryable failure.
func (c *Client) Ack(ctx context.Context, topic, group string, tokens ...string) ([]TokenResult, error) {
	var out []TokenResult
	err := c.do(ctx, "Ack", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.Ack(ctx, connect.NewRequest(&logdv1.AckRequest{Topic: topic, Group: group, Tokens: tokens}))
		if err != nil {
			return fromRPC(err)
		}
		out, err = tokenResults(resp.Msg.Results)
		return err // a *TokenError is not retryable
	})
	return out, queueCallError("ack", topic, group, err)
}

// Nack is one negative acknowledgement.
type Nack struct {
	Token string
	// Permanent dead-letters the record at once (reason "rejected").
	Permanent bool
	// Error describes the failure; it is kept as the record's last error
	// and written to the dead-letter record.
	Error string
	// Delay, if set, replaces the group's backoff for a transient nack.
	Delay *time.Duration
}

// Nack fails deliveries: a transient nack makes the record available again
// after its backoff (or Delay), or dead-letters it after its last allowed
// delivery; a permanent nack dead-letters it at once. Results and errors
// are as for Ack. A repeated nack of the same delivery is refused as stale
// (it is no longer in flight), so a retried nack cannot fail a delivery
// twice.
func (c *Client) Nack(ctx context.Context, topic, group string, nacks ...Nack) ([]TokenResult, error) {
	req := &logdv1.NackRequest{Topic: topic, Group: group, Nacks: make([]*logdv1.QueueNack, len(nacks))}
	for i, n := range nacks {
		qn := &logdv1.QueueNack{Token: n.Token, Permanent: n.Permanent, Error: n.Error}
		if n.Delay != nil {
			ms := n.Delay.Milliseconds()
			qn.DelayMs = &ms
		}
		req.Nacks[i] = qn
	}
	var out []TokenResult
	err := c.do(ctx, "Nack", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.Nack(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out, err = tokenResults(resp.Msg.Results)
		return err // a *TokenError is not retryable
	})
	return out, queueCallError("nack", topic, group, err)
}

// Extend moves the lease deadline of live deliveries to now+lease (0: the
// group's lease). Results and errors are as for Ack.
func (c *Client) Extend(ctx context.Context, topic, group string, lease time.Duration, tokens ...string) ([]TokenResult, error) {
	var out []TokenResult
	err := c.do(ctx, "Extend", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.Extend(ctx, connect.NewRequest(&logdv1.ExtendRequest{Topic: topic, Group: group, Tokens: tokens, LeaseMs: lease.Milliseconds()}))
		if err != nil {
			return fromRPC(err)
		}
		out, err = tokenResults(resp.Msg.Results)
		return err // a *TokenError is not retryable
	})
	return out, queueCallError("extend", topic, group, err)
}

func queueCallError(op, topic, group string, err error) error {
	if err == nil {
		return nil
	}
	var te *TokenError
	if errors.As(err, &te) {
		return err
	}
	return fmt.Errorf("%s %s/%s: %w", op, topic, group, err)
}
