package queue

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Group is the lease state machine of one queue group on one topic. It is
// pure: it reads no clock (every method takes the command's time, Unix ns),
// no randomness and no storage (records are looked up through a
// RecordSource), so replicas applying the same commands end in the same
// state. It is not safe for concurrent use; the caller serializes.
type Group struct {
	topic, name string
	cfg         Config
	secret      []byte
	seed        uint64
	createIndex uint64
	createdAt   int64
	parts       []*partitionState
	// cursor is the partition a claim starts from; it rotates so that
	// claims spread over partitions.
	cursor int
	// paused: claims deliver nothing (pause.go).
	paused bool
	// exact: the partitions' LiveBytes and FreshBytes are the exact bytes
	// of the backlog (health.go, SetExactBytes).
	exact bool
	// finishedBytes sums the sizes of the records finished while the
	// group counted exact bytes; drain holds the drain-rate samples
	// (drain.go).
	finishedBytes int64
	drain         []drainSample
	// historyBytes is the error text the records' histories hold
	// (history.go), derived from them; historyBudget, when positive,
	// replaces HistoryBudget (for tests).
	historyBytes  int64
	historyBudget int64
}

// partitionState is one partition's state: every offset below Start is
// finished; offsets in [Start, Next) are finished unless tracked; offsets
// at or above Next were never delivered.
type partitionState struct {
	Start int64 `json:"start"`
	Next  int64 `json:"next"`
	// Tracked holds records of [Start, Next) that were delivered (or
	// decided for the dead-letter topic), sorted by offset. Finished
	// entries stay until compaction.
	Tracked []*leaseRecord `json:"tracked,omitempty"`
	// Live counts unfinished tracked records; MaxInFlight bounds it.
	Live int `json:"live"`
	// Wake is a lower bound on the time a tracked record next becomes
	// claimable or pending by the passage of time (0: one may be now).
	Wake int64 `json:"wake"`
	// DeadPending counts records marked for the dead-letter topic.
	DeadPending int `json:"dead_pending,omitempty"`
	// Acked and DeadLettered count finished records, for describe.
	Acked        int64 `json:"acked"`
	DeadLettered int64 `json:"dead_lettered"`
	// Recent remembers the latest finished deliveries (a ring).
	Recent    []finishedDelivery `json:"recent,omitempty"`
	RecentPos int                `json:"recent_pos,omitempty"`
	// AppendedRecords and AppendedBytes count what was appended since the
	// group began, for the backlog's byte estimate (health.go).
	AppendedRecords int64 `json:"appended_records,omitempty"`
	AppendedBytes   int64 `json:"appended_bytes,omitempty"`
	// Nacked counts accepted nacks and Expired leases found expired (when
	// settled), for the health view's rates.
	Nacked  int64 `json:"nacked,omitempty"`
	Expired int64 `json:"expired,omitempty"`
	// LiveBytes sums the Size of the unfinished tracked records and
	// FreshBytes the sizes of the records in [Next, end), while the group
	// counts exact bytes (health.go).
	LiveBytes  int64 `json:"live_bytes,omitempty"`
	FreshBytes int64 `json:"fresh_bytes,omitempty"`
	// Appended marks the append times of the unfinished records, while
	// the group counts exact bytes (age.go).
	Appended []appendMark `json:"appended,omitempty"`
}

// New makes the state of a new group. starts holds each partition's
// first offset to work (0, or the end offset for a group that takes only
// new records). secret seeds the delivery tokens and backoff jitter.
func New(topic, name string, cfg Config, starts []int64, secret []byte, index uint64, now int64) (*Group, error) {
	cfg = cfg.WithDefaults(topic, name)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	q := &Group{topic: topic, name: name, cfg: cfg, secret: slices.Clone(secret), seed: backoffSeed(secret), createIndex: index, createdAt: now}
	for _, s := range starts {
		q.parts = append(q.parts, &partitionState{Start: s, Next: s, Wake: math.MaxInt64})
	}
	return q, nil
}

// Topic returns the topic the group works.
func (q *Group) Topic() string { return q.topic }

// Name returns the group's name.
func (q *Group) Name() string { return q.name }

// Config returns the group's settings, defaults applied.
func (q *Group) Config() Config { return q.cfg }

// CreatedAt returns the group's creation time, Unix ns.
func (q *Group) CreatedAt() int64 { return q.createdAt }

// Partitions returns the number of partitions the group works.
func (q *Group) Partitions() int { return len(q.parts) }

// SetConfig replaces the group's settings. Records in flight keep their
// leases; new limits apply from the next command.
func (q *Group) SetConfig(cfg Config) error {
	cfg = cfg.WithDefaults(q.topic, q.name)
	if err := cfg.Validate(); err != nil {
		return err
	}
	q.cfg = cfg
	return nil
}

// RecordInfo is what a claim needs to know about a record before it
// delivers it.
type RecordInfo struct {
	// Exists is false when the offset holds no deliverable record (a
	// control record or a gap); the offset is skipped.
	Exists bool
	// Timestamp is the record's time, Unix ns (for the age limit).
	Timestamp int64
	// Deadline is the record's business deadline, Unix ns; 0 for none.
	// InvalidDeadline: the record has a deadline header that could not be
	// read; it is dead-lettered (reason "invalid_deadline").
	Deadline        int64
	InvalidDeadline bool
	// Size counts the record's key, value and header bytes.
	Size int
}

// RecordSource looks records up for a claim. Lookups must be
// deterministic: the same answer on every replica for the same command.
// An error (I/O, corruption) aborts the claim; the caller must then stop,
// since the state may be half-changed.
type RecordSource interface {
	RecordInfo(partition int32, offset int64) (RecordInfo, error)
}

// ClaimRequest is one claim command.
type ClaimRequest struct {
	// Now is the command's time and Index its Raft index (tokens derive
	// from it).
	Now   int64
	Index uint64
	// Max bounds the records delivered (at least 1).
	Max int
	// MaxBytes bounds their total Size; at least one record is delivered
	// whatever its size. 0 means no bound.
	MaxBytes int
	// Lease is the lease of every delivery; 0 means the group's default.
	Lease time.Duration
	// Ends holds each partition's end offset as of this command.
	Ends []int64
	// Worker names the claiming worker (at most MaxWorkerLen bytes; ""
	// for none), kept with each delivery.
	Worker string
}

// Delivery is one record handed out by a claim.
type Delivery struct {
	Partition int32
	Offset    int64
	// Deliveries is this delivery's number: 1 for the first.
	Deliveries     uint32
	Token          Token
	LeaseUntil     int64
	FirstDelivered int64
}

// ClaimResult is what a claim did.
type ClaimResult struct {
	Deliveries []Delivery
	// AtCap lists partitions that held claimable fresh records the claim
	// could not take because the in-flight cap was reached.
	AtCap []int32
}

// Claim delivers up to req.Max records. Per partition, starting from a
// rotating cursor, it first settles tracked records whose time has come
// (expired leases become ready, or pending for the dead-letter topic after
// the last allowed delivery; delayed records become ready), then offers
// ready records in offset order, then fresh records from Next, while the
// partition is under its in-flight cap. A record past its business
// deadline or the age limit is marked for the dead-letter topic instead of
// delivered. Nothing here depends on map order or a clock.
func (q *Group) Claim(req ClaimRequest, src RecordSource) (ClaimResult, error) {
	var res ClaimResult
	if req.Max < 1 {
		return res, fmt.Errorf("%w: claim of %d records", ErrInvalidRequest, req.Max)
	}
	if len(req.Ends) != len(q.parts) {
		return res, fmt.Errorf("%w: %d end offsets for %d partitions", ErrInvalidRequest, len(req.Ends), len(q.parts))
	}
	if len(req.Worker) > MaxWorkerLen {
		return res, fmt.Errorf("%w: worker id of %d bytes, at most %d", ErrInvalidRequest, len(req.Worker), MaxWorkerLen)
	}
	lease := req.Lease
	if lease <= 0 {
		lease = q.cfg.Lease
	}
	if lease > MaxLease {
		return res, fmt.Errorf("%w: lease %v above %v", ErrInvalidRequest, lease, MaxLease)
	}
	q.Tick(req.Now)
	if q.paused {
		return res, nil
	}
	bytes := 0
	full := func() bool {
		return len(res.Deliveries) >= req.Max || (req.MaxBytes > 0 && bytes >= req.MaxBytes && len(res.Deliveries) > 0)
	}
	n := len(q.parts)
	start := q.cursor
	for i := 0; i < n && !full(); i++ {
		pi := (start + i) % n
		p := q.parts[pi]
		part := int32(pi)
		// Tracked records first: redeliveries are older work.
		if req.Now >= p.Wake {
			wake := int64(math.MaxInt64)
			for _, r := range p.Tracked {
				q.settle(p, r, req.Now)
				switch r.State {
				case leaseReady:
					if full() {
						wake = 0
						continue
					}
					info, err := src.RecordInfo(part, r.Offset)
					if err != nil {
						return res, err
					}
					if !info.Exists {
						// Gone since its last delivery: nothing to work.
						q.finish(p, r, false)
						continue
					}
					if reason := q.undeliverable(info, req.Now); reason != "" {
						q.endAttempt(r, req.Now, reason, "")
						q.markDead(p, r, reason)
						continue
					}
					res.Deliveries = append(res.Deliveries, q.deliver(part, r, req, lease))
					bytes += info.Size
					wake = min(wake, r.Until)
				case leaseInFlight, leaseDelayed:
					wake = min(wake, r.Until)
				}
			}
			p.Wake = wake
		}
		// Then fresh records, while under the cap.
		end := req.Ends[pi]
		for p.Next < end && !full() {
			if p.Live >= q.cfg.MaxInFlight {
				res.AtCap = append(res.AtCap, part)
				break
			}
			off := p.Next
			info, err := src.RecordInfo(part, off)
			if err != nil {
				return res, err
			}
			p.Next++
			if !info.Exists {
				continue // finished by being skipped
			}
			r := &leaseRecord{Offset: off, State: leaseReady}
			p.Tracked = append(p.Tracked, r)
			p.Live++
			if q.exact {
				r.Size = int64(info.Size)
				p.FreshBytes -= r.Size
				p.LiveBytes += r.Size
			}
			if reason := q.undeliverable(info, req.Now); reason != "" {
				q.endAttempt(r, req.Now, reason, "")
				q.markDead(p, r, reason)
				continue
			}
			res.Deliveries = append(res.Deliveries, q.deliver(part, r, req, lease))
			bytes += info.Size
			p.Wake = min(p.Wake, r.Until)
		}
		q.compact(p)
	}
	q.cursor = (start + 1) % max(n, 1)
	return res, nil
}

// settle applies the passage of time to one record: an expired lease makes
// it ready again, or pending for the dead-letter topic once it used its
// last delivery; a delayed record whose time has come is ready.
func (q *Group) settle(p *partitionState, r *leaseRecord, now int64) {
	switch {
	case r.State == leaseInFlight && now >= r.Until:
		p.Expired++
		q.endAttempt(r, r.Until, OutcomeLeaseExpired, "")
		if int(r.Deliveries) >= q.cfg.MaxDeliveries {
			q.markDead(p, r, ReasonMaxDeliveries)
			if r.LastError == "" {
				r.LastError = "lease expired"
			}
			return
		}
		r.State = leaseReady
	case r.State == leaseDelayed && now >= r.Until:
		r.State = leaseReady
	}
}

// undeliverable returns the dead-letter reason of a record that must not be
// delivered at now, or "".
func (q *Group) undeliverable(info RecordInfo, now int64) string {
	switch {
	case info.InvalidDeadline:
		return ReasonInvalidDeadline
	case info.Deadline != 0 && now >= info.Deadline:
		return ReasonDeadlineExceeded
	case q.cfg.AgeLimit > 0 && now-info.Timestamp >= int64(q.cfg.AgeLimit):
		return ReasonExpired
	}
	return ""
}

func (q *Group) deliver(part int32, r *leaseRecord, req ClaimRequest, lease time.Duration) Delivery {
	r.Deliveries++
	r.State = leaseInFlight
	r.Until = req.Now + int64(lease)
	r.Tag = leaseTag(q.secret, req.Index, part, r.Offset, r.Deliveries)
	if r.Deliveries == 1 {
		r.First = req.Now
	}
	r.Last = req.Now
	r.Worker, r.Extends = req.Worker, 0
	q.startAttempt(r, req.Now, req.Worker)
	return Delivery{
		Partition:      part,
		Offset:         r.Offset,
		Deliveries:     r.Deliveries,
		Token:          Token{Partition: part, Offset: r.Offset, Delivery: r.Deliveries, Tag: r.Tag},
		LeaseUntil:     r.Until,
		FirstDelivered: r.First,
	}
}

// finish marks a tracked record finished and remembers the delivery.
func (q *Group) finish(p *partitionState, r *leaseRecord, dead bool) {
	if dead {
		r.State = leaseDead
		p.DeadLettered++
	} else {
		r.State = leaseAcked
		p.Acked++
	}
	p.Live--
	p.LiveBytes -= r.Size
	q.finishedBytes += r.Size
	r.Size = 0
	q.dropHistory(r)
	fd := finishedDelivery{Offset: r.Offset, Tag: r.Tag, Dead: dead}
	if len(p.Recent) < recentFinished {
		p.Recent = append(p.Recent, fd)
	} else {
		p.Recent[p.RecentPos] = fd
	}
	p.RecentPos = (p.RecentPos + 1) % recentFinished
}

// compact drops finished entries once they outnumber the live ones (so the
// work is amortized and memory stays within about twice the in-flight cap),
// else only a finished prefix, and moves Start up to the first unfinished
// offset.
func (q *Group) compact(p *partitionState) {
	if finished := len(p.Tracked) - p.Live; finished > p.Live {
		p.Tracked = slices.DeleteFunc(p.Tracked, func(r *leaseRecord) bool { return r.State.finished() })
	} else if finished > 0 {
		i := 0
		for i < len(p.Tracked) && p.Tracked[i].State.finished() {
			i++
		}
		p.Tracked = slices.Delete(p.Tracked, 0, i)
	}
	if len(p.Tracked) > 0 {
		p.Start = p.Tracked[0].Offset
	} else {
		p.Start = p.Next
		p.Wake = math.MaxInt64 // nothing left to wake for
	}
	p.trimMarks()
}

// markDead marks a record for the dead-letter topic.
func (q *Group) markDead(p *partitionState, r *leaseRecord, reason string) {
	r.State, r.Reason = leaseDeadPending, reason
	p.DeadPending++
}

// find returns the tracked record at offset, or nil.
func (p *partitionState) find(offset int64) *leaseRecord {
	i := sort.Search(len(p.Tracked), func(i int) bool { return p.Tracked[i].Offset >= offset })
	if i < len(p.Tracked) && p.Tracked[i].Offset == offset {
		return p.Tracked[i]
	}
	return nil
}

// TokenOutcome says what happened to one token of an ack, nack or extend.
type TokenOutcome uint8

const (
	// TokenOK: the operation was applied.
	TokenOK TokenOutcome = iota
	// TokenDuplicate: the delivery was already acknowledged (an ack), or
	// already finished by this delivery; nothing changed.
	TokenDuplicate
	// TokenStale: not the current delivery, or its lease has expired;
	// nothing changed.
	TokenStale
)

func (o TokenOutcome) String() string {
	switch o {
	case TokenOK:
		return "ok"
	case TokenDuplicate:
		return "duplicate"
	case TokenStale:
		return "stale"
	}
	return "unknown"
}

// TokenResult answers one token.
type TokenResult struct {
	Outcome TokenOutcome
	// Detail explains a stale or duplicate outcome.
	Detail string
	// DeadLettered: a nack moved the record to the dead-letter topic (it is
	// pending until the command's dead letters are written; see
	// PendingDeadLetters).
	DeadLettered bool
	// AvailableAt: a transient nack's record is offered again at this time.
	AvailableAt int64
	// LeaseUntil: an extend's new lease deadline.
	LeaseUntil int64
}

// current finds the record a token names and checks that the token is the
// current delivery with a live lease. Otherwise it returns the result to
// give (stale or duplicate) and a nil record.
func (q *Group) current(t Token, now int64, ack bool) (*partitionState, *leaseRecord, TokenResult) {
	if t.Partition < 0 || int(t.Partition) >= len(q.parts) {
		return nil, nil, TokenResult{Outcome: TokenStale, Detail: fmt.Sprintf("no partition %d", t.Partition)}
	}
	p := q.parts[t.Partition]
	r := p.find(t.Offset)
	if r == nil {
		if t.Offset >= p.Next {
			return nil, nil, TokenResult{Outcome: TokenStale, Detail: "record was never delivered"}
		}
		another := false
		for _, fd := range p.Recent {
			if fd.Offset == t.Offset && fd.Tag == t.Tag {
				return nil, nil, finishedResult(fd.Dead, ack)
			}
			another = another || fd.Offset == t.Offset
		}
		if another {
			return nil, nil, TokenResult{Outcome: TokenStale, Detail: "record already finished by another delivery"}
		}
		// Below the unfinished records and not among the recent
		// deliveries: finished long ago, or before the group began (an
		// offset it never delivered). Say only what is known.
		return nil, nil, TokenResult{Outcome: TokenStale, Detail: fmt.Sprintf(
			"no delivery of offset %d is in flight or recently finished; the group's unfinished records start at offset %d", t.Offset, p.Start)}
	}
	switch {
	case r.Deliveries != t.Delivery || r.Tag != t.Tag:
		if r.Deliveries > t.Delivery {
			return nil, nil, TokenResult{Outcome: TokenStale, Detail: fmt.Sprintf("delivery %d was superseded by delivery %d", t.Delivery, r.Deliveries)}
		}
		return nil, nil, TokenResult{Outcome: TokenStale, Detail: "token does not match the record's delivery"}
	case r.State.finished():
		return nil, nil, finishedResult(r.State == leaseDead, ack)
	case r.State != leaseInFlight:
		return nil, nil, TokenResult{Outcome: TokenStale, Detail: fmt.Sprintf("record is %s, not in flight", r.State)}
	case now >= r.Until:
		return nil, nil, TokenResult{Outcome: TokenStale, Detail: fmt.Sprintf("lease expired at %s", time.Unix(0, r.Until).UTC().Format(time.RFC3339Nano))}
	}
	return p, r, TokenResult{}
}

// finishedResult answers a token whose delivery is finished: a repeated
// ack of an acked delivery is a duplicate (acks are safe to retry);
// anything else is stale, since the delivery is no longer in flight.
func finishedResult(dead, ack bool) TokenResult {
	switch {
	case dead:
		return TokenResult{Outcome: TokenStale, Detail: "delivery already finished: dead-lettered", DeadLettered: true}
	case ack:
		return TokenResult{Outcome: TokenDuplicate, Detail: "delivery already acknowledged"}
	}
	return TokenResult{Outcome: TokenStale, Detail: "delivery already acknowledged"}
}

// Ack finishes the records of current deliveries. Each token gets its own
// result; a stale token changes nothing.
func (q *Group) Ack(now int64, tokens []Token) []TokenResult {
	q.Tick(now)
	out := make([]TokenResult, len(tokens))
	touched := make([]bool, len(q.parts))
	for i, t := range tokens {
		p, r, res := q.current(t, now, true)
		if r == nil {
			out[i] = res
			continue
		}
		q.finish(p, r, false)
		touched[t.Partition] = true
	}
	q.compactTouched(touched)
	return out
}

// Nack is one negative acknowledgement.
type Nack struct {
	Token Token
	// Permanent dead-letters the record at once (reason "rejected").
	Permanent bool
	// Delay, when HasDelay, replaces the backoff of a transient nack.
	Delay    time.Duration
	HasDelay bool
	// Error is the failure's text, kept as the record's last error.
	Error string
}

// Nack fails current deliveries. A transient nack makes the record
// available again after its backoff (or the nack's delay), or marks it for
// the dead-letter topic (reason "max_deliveries") when that was its last
// allowed delivery; a permanent nack marks it at once (reason "rejected").
func (q *Group) Nack(now int64, nacks []Nack) []TokenResult {
	q.Tick(now)
	out := make([]TokenResult, len(nacks))
	for i, n := range nacks {
		if n.HasDelay && (n.Delay < 0 || n.Delay > MaxDelay) {
			out[i] = TokenResult{Outcome: TokenStale, Detail: fmt.Sprintf("delay %v outside [0, %v]", n.Delay, MaxDelay)}
			continue
		}
		p, r, res := q.current(n.Token, now, false)
		if r == nil {
			out[i] = res
			continue
		}
		r.LastError = n.Error
		p.Nacked++
		outcome := OutcomeNacked
		if n.Permanent {
			outcome = OutcomeRejected
		}
		q.endAttempt(r, now, outcome, n.Error)
		switch {
		case n.Permanent:
			q.markDead(p, r, ReasonRejected)
			out[i] = TokenResult{DeadLettered: true}
		case int(r.Deliveries) >= q.cfg.MaxDeliveries:
			q.markDead(p, r, ReasonMaxDeliveries)
			out[i] = TokenResult{DeadLettered: true}
		default:
			d := n.Delay
			if !n.HasDelay {
				d = backoff(q.cfg.BackoffBase, q.cfg.BackoffMax, q.seed, n.Token.Partition, r.Offset, r.Deliveries)
			}
			r.State, r.Until = leaseDelayed, now+int64(d)
			p.Wake = min(p.Wake, r.Until)
			out[i] = TokenResult{AvailableAt: r.Until}
		}
	}
	return out
}

// Extend moves the lease deadline of current deliveries to now+lease (0:
// the group's default lease).
func (q *Group) Extend(now int64, tokens []Token, lease time.Duration) ([]TokenResult, error) {
	if lease < 0 || lease > MaxLease {
		return nil, fmt.Errorf("%w: lease %v outside [0, %v]", ErrInvalidRequest, lease, MaxLease)
	}
	if lease == 0 {
		lease = q.cfg.Lease
	}
	q.Tick(now)
	out := make([]TokenResult, len(tokens))
	for i, t := range tokens {
		_, r, res := q.current(t, now, false)
		if r == nil {
			out[i] = res
			continue
		}
		r.Until = now + int64(lease)
		r.Extends++
		q.extendAttempt(r)
		out[i] = TokenResult{LeaseUntil: r.Until}
	}
	return out, nil
}

func (q *Group) compactTouched(touched []bool) {
	for i, t := range touched {
		if t {
			q.compact(q.parts[i])
		}
	}
}

// DeadLetter is a record to move to the dead-letter topic.
type DeadLetter struct {
	Partition      int32
	Offset         int64
	Reason         string
	LastError      string
	Deliveries     uint32
	FirstDelivered int64 // 0 if never delivered
	LastDelivered  int64
	// History is the record's last attempts (a copy), HistoryDropped how
	// many older ones it forgot; none before feature level 6.
	History        []Attempt
	HistoryDropped uint32
}

// PendingDeadLetters lists records marked for the dead-letter topic, by
// partition then offset, at most limit of them (limit <= 0: all). The
// caller writes them to the dead-letter topic and calls MarkDeadLettered in
// the same command, so a record is never both live and dead.
func (q *Group) PendingDeadLetters(limit int) []DeadLetter {
	var out []DeadLetter
	for pi, p := range q.parts {
		if p.DeadPending == 0 {
			continue
		}
		for _, r := range p.Tracked {
			if r.State != leaseDeadPending {
				continue
			}
			if limit > 0 && len(out) >= limit {
				return out
			}
			out = append(out, DeadLetter{
				Partition: int32(pi), Offset: r.Offset, Reason: r.Reason, LastError: r.LastError,
				Deliveries: r.Deliveries, FirstDelivered: r.First, LastDelivered: r.Last,
				History: slices.Clone(r.History), HistoryDropped: r.HistoryDropped,
			})
		}
	}
	return out
}

// MarkDeadLettered finishes records the caller has written to the
// dead-letter topic.
func (q *Group) MarkDeadLettered(dls []DeadLetter) {
	touched := make([]bool, len(q.parts))
	for _, d := range dls {
		if d.Partition < 0 || int(d.Partition) >= len(q.parts) {
			continue
		}
		p := q.parts[d.Partition]
		if r := p.find(d.Offset); r != nil && r.State == leaseDeadPending {
			p.DeadPending--
			q.finish(p, r, true)
			touched[d.Partition] = true
		}
	}
	q.compactTouched(touched)
}
