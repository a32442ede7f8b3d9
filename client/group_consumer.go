package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Defaults of GroupConsumerOptions.
const (
	DefaultSessionTimeout     = 10 * time.Second
	DefaultAutoCommitInterval = time.Second
	DefaultGroupMaxWait       = time.Second
)

// ErrNoCommittedOffset is returned by Poll for a partition that has no
// committed offset when the reset policy is "none".
var ErrNoCommittedOffset = errors.New("logd: no committed offset and reset policy is none")

// GroupConsumerOptions configure a GroupConsumer. Zero values take the
// documented defaults.
type GroupConsumerOptions struct {
	Group  string
	Topics []string
	// MemberID identifies this member across re-joins; default a random id
	// prefixed with the host name.
	MemberID string
	// SessionTimeout: the server removes the member (and reassigns its
	// partitions) when it has not heard from it for this long.
	// Default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// HeartbeatInterval: Poll heartbeats when this much time has passed
	// since the last one. Default SessionTimeout/3. Poll must be called at
	// least this often (its long poll is bounded by it).
	HeartbeatInterval time.Duration
	// ResetPolicy is earliest (default), latest or none: where to start
	// without a committed offset, and where to go when retention passed
	// the committed offset.
	ResetPolicy string
	// ManualCommit disables auto-commit: call Commit or CommitOffsets.
	// With auto-commit, Poll commits the records returned by earlier Polls
	// (Kafka's semantics: at least once) every AutoCommitInterval, and
	// before partitions are revoked and on Close.
	ManualCommit       bool
	AutoCommitInterval time.Duration // default DefaultAutoCommitInterval
	// MaxWait bounds each long poll; default DefaultGroupMaxWait.
	MaxWait time.Duration
	// MaxBytes and MaxRecords bound each partition's fetch.
	MaxBytes, MaxRecords int32
	// OnAssigned is called from Poll with partitions newly assigned.
	OnAssigned func(ctx context.Context, partitions []TopicPartition)
	// OnRevoked is called from Poll before partitions are given up, while
	// they can still be committed (call Commit in it with ManualCommit).
	// It is also called for partitions already lost (the member was
	// fenced or expired); commits of those fail with ErrStaleGeneration
	// or ErrUnknownMember.
	OnRevoked func(ctx context.Context, partitions []TopicPartition)
	// OnAutoReset is called from Poll when retention had passed the
	// group's position in a partition and the server, following
	// ResetPolicy, moved the group's committed offset from From to To:
	// the records in between were never returned (those below the log
	// start are gone). Poll's records of that partition start at To.
	OnAutoReset func(AutoReset)
	// Now is the clock that schedules heartbeats and commits; default
	// time.Now.
	Now func() time.Time
	// Logger receives, at info, that the member waits for partitions a
	// previous member holds until its session expires, or, assigned no
	// partition at all, for the members holding them (a consumer
	// restarted after a crash would otherwise look hung for up to that
	// member's SessionTimeout). Default slog.Default().
	Logger *slog.Logger
}

// AutoReset reports that a group's position in a partition was moved by
// its reset policy because retention had removed the records there: the
// records from From up to To were skipped.
type AutoReset struct {
	Partition TopicPartition
	From, To  int64
}

// Validate reports options that cannot be used.
func (o GroupConsumerOptions) Validate() error {
	var errs []error
	if o.Group == "" {
		errs = append(errs, errors.New("group consumer: group is empty"))
	}
	if len(o.Topics) == 0 {
		errs = append(errs, errors.New("group consumer: no topics"))
	}
	if o.SessionTimeout < 0 || o.HeartbeatInterval < 0 || o.AutoCommitInterval < 0 || o.MaxWait < 0 {
		errs = append(errs, errors.New("group consumer: durations must not be negative"))
	}
	switch o.ResetPolicy {
	case "", "earliest", "latest", "none":
	default:
		errs = append(errs, fmt.Errorf("group consumer: reset policy %q: want earliest, latest or none", o.ResetPolicy))
	}
	if o.MaxBytes < 0 || o.MaxRecords < 0 {
		errs = append(errs, errors.New("group consumer: max bytes and max records must not be negative"))
	}
	return errors.Join(errs...)
}

// GroupConsumer consumes topics as a member of a consumer group: the
// server assigns it partitions, it reads them from the group's committed
// offsets and commits its progress. Poll joins, heartbeats and commits;
// reads are prefetched: each owned partition has at most one fetch
// outstanding (a long poll carrying the generation), started by Poll and
// restarted as soon as Poll takes its answer, so the next batch is on its
// way while the caller processes this one. Those fetch goroutines belong
// to the consumer: they end when their partition is revoked or fenced
// (waited for there) and on Close, which must be called. Poll returns as
// soon as any partition has records. Commits cover only the records Poll
// returned, never prefetched ones. It re-joins by itself after being
// fenced (stale generation), expired (unknown member) or after a leader
// change. A GroupConsumer is not safe for concurrent use.
type GroupConsumer struct {
	c      *Client
	opts   GroupConsumerOptions
	member string

	joined     bool
	generation int64
	owned      map[TopicPartition]*gcPartition
	lastBeat   time.Time
	lastCommit time.Time
	closed     bool

	// Prefetching (see startFetch): fctx is the fetches' context, ended by
	// Close; wg tracks their goroutines; finished fetches append to ready
	// (guarded by mu) and wake Poll through notify.
	fctx    context.Context
	fcancel context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	ready   []*fetchResult
	notify  chan struct{}
}

// gcPartition is the consumer's state of one owned partition.
type gcPartition struct {
	since     int64
	pos       int64 // offset after the records Poll returned: what a commit covers
	next      int64 // next offset to fetch (at or after pos: prefetched)
	committed int64 // last committed offset known; -1 for none
	// inflight is set while a fetch is outstanding; cancel ends it and
	// done is closed when its goroutine has ended. fetchErr holds the
	// partition back until the next Poll after a failed fetch.
	inflight bool
	fetchErr bool
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewGroupConsumer returns a group member. It does not contact the server;
// the first Poll joins.
func (c *Client) NewGroupConsumer(opts GroupConsumerOptions) (*GroupConsumer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = opts.SessionTimeout / 3
	}
	if opts.AutoCommitInterval == 0 {
		opts.AutoCommitInterval = DefaultAutoCommitInterval
	}
	if opts.MaxWait == 0 {
		opts.MaxWait = DefaultGroupMaxWait
	}
	opts.MaxWait = min(opts.MaxWait, opts.HeartbeatInterval)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ResetPolicy == "" {
		opts.ResetPolicy = "earliest"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	member := opts.MemberID
	if member == "" {
		var b [6]byte
		rand.Read(b[:])
		host, _ := os.Hostname()
		if host == "" {
			host = "member"
		}
		member = host + "-" + hex.EncodeToString(b[:])
	}
	return &GroupConsumer{c: c, opts: opts, member: member, owned: map[TopicPartition]*gcPartition{}, notify: make(chan struct{}, 1)}, nil
}

// MemberID returns the member's id.
func (gc *GroupConsumer) MemberID() string { return gc.member }

// Generation returns the generation of the member's current assignment.
func (gc *GroupConsumer) Generation() int64 { return gc.generation }

// Assignment returns the partitions the member owns, sorted.
func (gc *GroupConsumer) Assignment() []TopicPartition {
	out := make([]TopicPartition, 0, len(gc.owned))
	for tp := range gc.owned {
		out = append(out, tp)
	}
	slices.SortFunc(out, cmpTP)
	return out
}

// Position returns the member's position in an owned partition: the
// offset after the records Poll returned from it (what Commit commits),
// or, before Poll returned any, the group's position there. ok is false
// for a partition the member does not own and for one without a position
// (no committed offset under reset policy none).
func (gc *GroupConsumer) Position(tp TopicPartition) (offset int64, ok bool) {
	p, owned := gc.owned[tp]
	if !owned || p.pos < 0 {
		return 0, false
	}
	return p.pos, true
}

func cmpTP(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition - b.Partition)
}

// Poll returns the next records of the member's partitions, waiting up to
// MaxWait when there are none (then it returns an empty slice, not an
// error). Records of one partition come in offset order. On the way it
// joins, heartbeats, handles revocations and auto-commits. Fencing and
// expiry are handled inside (the member re-joins and restarts from the
// committed offsets); other errors are returned and Poll may be called
// again.
func (gc *GroupConsumer) Poll(ctx context.Context) ([]FetchedRecord, error) {
	if gc.closed {
		return nil, errors.New("group consumer is closed")
	}
	if err := gc.maintain(ctx); err != nil {
		return nil, err
	}
	return gc.fetch(ctx)
}

// maintain joins, heartbeats and auto-commits as due.
func (gc *GroupConsumer) maintain(ctx context.Context) error {
	now := gc.opts.Now()
	if !gc.joined {
		if err := gc.join(ctx); err != nil {
			return err
		}
	} else if now.Sub(gc.lastBeat) >= gc.opts.HeartbeatInterval {
		if err := gc.heartbeat(ctx, nil); err != nil {
			return err
		}
	}
	if !gc.opts.ManualCommit && now.Sub(gc.lastCommit) >= gc.opts.AutoCommitInterval {
		if err := gc.commitOwned(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

func (gc *GroupConsumer) join(ctx context.Context) error {
	a, err := gc.c.joinGroup(ctx, &logdv1.JoinGroupRequest{
		Group: gc.opts.Group, MemberId: gc.member, Topics: gc.opts.Topics,
		SessionTimeoutMs: int32(gc.opts.SessionTimeout.Milliseconds()), ResetPolicy: gc.opts.ResetPolicy,
	})
	if err != nil {
		return err
	}
	gc.joined = true
	return gc.apply(ctx, a)
}

// heartbeat sends a heartbeat (releasing partitions) and applies the
// answer; an unknown member re-joins.
func (gc *GroupConsumer) heartbeat(ctx context.Context, released []TopicPartition) error {
	req := &logdv1.GroupHeartbeatRequest{Group: gc.opts.Group, MemberId: gc.member}
	for _, tp := range released {
		req.Released = append(req.Released, &logdv1.GroupTopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	a, err := gc.c.groupHeartbeat(ctx, req)
	if errors.Is(err, ErrUnknownMember) {
		gc.lose(ctx)
		return gc.join(ctx)
	}
	if err != nil {
		return err
	}
	return gc.apply(ctx, a)
}

// lose drops every partition after the member was expired.
func (gc *GroupConsumer) lose(ctx context.Context) {
	gc.joined = false
	if lost := gc.Assignment(); len(lost) > 0 {
		if gc.opts.OnRevoked != nil {
			gc.opts.OnRevoked(ctx, lost)
		}
		for _, tp := range lost {
			gc.drop(tp)
		}
	}
}

// apply installs an assignment: partitions gone are revoked, new ones
// start at their position, and ones fenced since our generation restart
// at the committed position. Partitions to revoke are committed (with
// auto-commit), dropped and released in a heartbeat.
func (gc *GroupConsumer) apply(ctx context.Context, a *logdv1.GroupAssignment) error {
	gc.lastBeat = gc.opts.Now()
	prevGen := gc.generation
	gc.generation = a.Generation
	next := map[TopicPartition]bool{}
	var added []TopicPartition
	var noOffset error
	for _, ap := range a.Partitions {
		tp := TopicPartition{Topic: ap.Topic, Partition: ap.Partition}
		next[tp] = true
		p, had := gc.owned[tp]
		if had && ap.SinceGeneration <= prevGen {
			p.since = ap.SinceGeneration
			p.committed = max(p.committed, ap.CommittedOffset)
			continue
		}
		// New to us, or fenced (moved away and back, or reset): restart
		// from the group's position; what was prefetched is dropped.
		gc.drop(tp)
		gc.owned[tp] = &gcPartition{since: ap.SinceGeneration, pos: ap.Position, next: ap.Position, committed: ap.CommittedOffset}
		if ap.Position < 0 {
			noOffset = fmt.Errorf("%s/%d in group %q: %w", tp.Topic, tp.Partition, gc.opts.Group, ErrNoCommittedOffset)
		}
		if !had {
			added = append(added, tp)
		}
	}
	var gone []TopicPartition
	for _, tp := range gc.Assignment() {
		if !next[tp] {
			gone = append(gone, tp)
		}
	}
	if len(gone) > 0 {
		if gc.opts.OnRevoked != nil {
			gc.opts.OnRevoked(ctx, gone)
		}
		for _, tp := range gone {
			gc.drop(tp)
		}
	}
	if len(added) > 0 && gc.opts.OnAssigned != nil {
		gc.opts.OnAssigned(ctx, added)
	}
	if a.Generation != prevGen {
		gc.noteWaiting(ctx)
	}
	if len(a.Revoke) > 0 {
		var revoke []TopicPartition
		for _, r := range a.Revoke {
			revoke = append(revoke, TopicPartition{Topic: r.Topic, Partition: r.Partition})
		}
		if gc.opts.OnRevoked != nil {
			gc.opts.OnRevoked(ctx, revoke)
		}
		if !gc.opts.ManualCommit {
			if err := gc.commitOwned(ctx, revoke); err != nil {
				return err
			}
		}
		for _, tp := range revoke {
			gc.drop(tp)
		}
		return gc.heartbeat(ctx, revoke)
	}
	return noOffset
}

// noteWaiting logs the partitions that wait for this member while another
// holds them, with the holder and when its session expires unless it
// heartbeats: the group's description says (DescribeGroup). A member
// assigned nothing, with nothing pending for it either (more members than
// partitions: a restarted process beside its old member's session, on a
// topic of one partition), logs the members holding its topics'
// partitions instead: it gets one when one of them leaves or expires. It
// is called once per generation; a failure to describe (a principal
// without describe permission) only leaves the log out.
func (gc *GroupConsumer) noteWaiting(ctx context.Context) {
	d, err := gc.c.DescribeGroup(ctx, gc.opts.Group)
	if err != nil {
		gc.opts.Logger.DebugContext(ctx, "group consumer: cannot tell whom the member waits for", "group", gc.opts.Group, "err", err)
		return
	}
	held := map[string][]string{}    // pending for this member, by holder
	holding := map[string][]string{} // of its topics, by another holder
	for _, p := range d.Partitions {
		if p.Owner == "" || p.Owner == gc.member {
			continue
		}
		tp := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
		if p.PendingOwner == gc.member {
			held[p.Owner] = append(held[p.Owner], tp)
		}
		if slices.Contains(gc.opts.Topics, p.Topic) {
			holding[p.Owner] = append(holding[p.Owner], tp)
		}
	}
	msg := "group consumer: waiting for a previous member's session to expire (or for it to release the partitions)"
	if len(held) == 0 && len(gc.owned) == 0 {
		held = holding
		msg = "group consumer: assigned no partition: waiting for a member holding them to leave or its session to expire"
	}
	for _, m := range d.Members {
		if ps := held[m.ID]; len(ps) > 0 {
			gc.opts.Logger.InfoContext(ctx, msg, "group", gc.opts.Group, "member", gc.member, "holder", m.ID, "partitions", ps,
				"until", m.LastSeen.Add(m.SessionTimeout).UTC().Format(time.RFC3339Nano))
		}
	}
}

// fetchResult is the answer to one partition's prefetch, decoded on the
// fetching goroutine.
type fetchResult struct {
	tp   TopicPartition
	p    *gcPartition // the partition state the fetch was started for
	from int64        // the offset it fetched from
	resp *logdv1.GroupFetchResponse
	recs []FetchedRecord
	next int64
	err  error
}

// startFetches starts a prefetch for every owned partition that has a
// position and none outstanding. Each is a long poll of MaxWait carrying
// the current generation; it runs on the consumer's context (it outlives
// the Poll that started it), and its result waits in gc.ready for a Poll.
func (gc *GroupConsumer) startFetches() {
	if gc.fctx == nil {
		gc.fctx, gc.fcancel = context.WithCancel(context.Background())
	}
	for tp, p := range gc.owned {
		if p.inflight || p.fetchErr || p.pos < 0 {
			continue
		}
		gc.startFetch(tp, p)
	}
}

// startFetch starts p's fetch from p.next.
func (gc *GroupConsumer) startFetch(tp TopicPartition, p *gcPartition) {
	wait := gc.opts.MaxWait
	req := &logdv1.GroupFetchRequest{Group: gc.opts.Group, MemberId: gc.member, Generation: gc.generation, Fetch: &logdv1.FetchRequest{
		Topic: tp.Topic, Partition: tp.Partition, Offset: p.next, MaxBytes: gc.opts.MaxBytes, MaxRecords: gc.opts.MaxRecords,
		// At least 1 ms, so an empty answer means the server waited and
		// restarting the fetch at once does not spin.
		MaxWaitMs: int32(max(wait.Milliseconds(), 1)),
		Batches:   !gc.c.opts.FetchRecords,
	}}
	ctx, cancel := context.WithCancel(gc.fctx)
	done := make(chan struct{})
	p.inflight, p.cancel, p.done = true, cancel, done
	from := p.next
	gc.wg.Go(func() {
		defer close(done)
		defer cancel()
		res := &fetchResult{tp: tp, p: p, from: from}
		res.resp, res.err = gc.c.groupFetch(ctx, req, wait)
		if res.err == nil {
			res.recs, res.next, res.err = decodeGroupFetch(tp, from, req.Fetch.MaxRecords, res.resp)
		}
		gc.mu.Lock()
		gc.ready = append(gc.ready, res)
		gc.mu.Unlock()
		select {
		case gc.notify <- struct{}{}:
		default: // a wake-up is already pending
		}
	})
}

// decodeGroupFetch turns a group fetch's answer into records at or after
// from (or the auto-reset target), and the next offset to fetch.
func decodeGroupFetch(tp TopicPartition, from int64, maxRecords int32, resp *logdv1.GroupFetchResponse) ([]FetchedRecord, int64, error) {
	pos := from
	if resp.AutoReset {
		pos = resp.ResetTo
	}
	recs, next, err := fetchedRecords(tp, pos, maxRecords, resp.GetFetch())
	if err != nil {
		return nil, 0, fmt.Errorf("group fetch %s/%d at %d: %w", tp.Topic, tp.Partition, pos, err)
	}
	return recs, next, nil
}

// stopFetch cancels p's outstanding fetch, if any, and waits for its
// goroutine to end; its result, if already in gc.ready, is discarded by
// take since p is no longer owned.
func (gc *GroupConsumer) stopFetch(p *gcPartition) {
	if p.inflight {
		p.cancel()
		<-p.done
		p.inflight = false
	}
}

// drop stops a partition's fetch and forgets it.
func (gc *GroupConsumer) drop(tp TopicPartition) {
	if p, ok := gc.owned[tp]; ok {
		gc.stopFetch(p)
		delete(gc.owned, tp)
	}
}

// fetch returns the records of the prefetches that have answered, waiting
// up to MaxWait for the first one with records. Each partition's next
// fetch starts as soon as its answer is taken, so it overlaps with the
// caller's processing of these records.
func (gc *GroupConsumer) fetch(ctx context.Context) ([]FetchedRecord, error) {
	if len(gc.owned) == 0 {
		// Nothing assigned: wait (bounded) so callers do not spin.
		t := time.NewTimer(gc.opts.MaxWait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		return nil, nil
	}
	// A partition whose last fetch failed is tried again once per Poll.
	for _, p := range gc.owned {
		p.fetchErr = false
	}
	gc.startFetches()
	var timeout <-chan time.Time
	for {
		out, err := gc.take(ctx)
		if len(out) > 0 || err != nil {
			return out, err
		}
		if timeout == nil {
			t := time.NewTimer(gc.opts.MaxWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, nil
		case <-gc.notify:
		}
	}
}

// take applies the answers that arrived: records of partitions still owned
// as fetched are returned and their positions advanced; fenced answers
// refresh the assignment (heartbeat); other errors are returned when no
// partition had records.
func (gc *GroupConsumer) take(ctx context.Context) ([]FetchedRecord, error) {
	gc.mu.Lock()
	ready := gc.ready
	gc.ready = nil
	gc.mu.Unlock()
	var out []FetchedRecord
	var firstErr error
	refresh := false
	for _, r := range ready {
		p, ok := gc.owned[r.tp]
		if !ok || p != r.p || !p.inflight || r.from != p.next {
			continue // revoked, fenced or superseded since it was started
		}
		p.inflight = false
		switch {
		case r.err == nil:
		case errors.Is(r.err, ErrStaleGeneration), errors.Is(r.err, ErrUnknownMember):
			refresh = true
			p.fetchErr = true
			continue
		default:
			p.fetchErr = true
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		if r.resp.AutoReset {
			p.pos, p.committed = r.resp.ResetTo, max(p.committed, r.resp.ResetTo)
			if gc.opts.OnAutoReset != nil {
				gc.opts.OnAutoReset(AutoReset{Partition: r.tp, From: r.resp.ResetFrom, To: r.resp.ResetTo})
			}
		}
		out = append(out, r.recs...)
		p.next = r.next
		// Records handed out are what a commit covers.
		p.pos = max(p.pos, r.next)
		gc.startFetch(r.tp, p)
	}
	if refresh {
		// Fenced or expired: learn the new assignment now; records of
		// partitions we still own are returned.
		if err := gc.heartbeat(ctx, nil); err != nil && firstErr == nil {
			firstErr = err
		}
		gc.startFetches()
	}
	if len(out) > 0 {
		return out, nil
	}
	return nil, firstErr
}

// Commit commits the positions of every owned partition: the offsets after
// the records Poll returned.
func (gc *GroupConsumer) Commit(ctx context.Context) error {
	return gc.commitOwned(ctx, nil)
}

// CommitOffsets commits explicit offsets (the next offsets to read) of
// owned partitions.
func (gc *GroupConsumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	req := &logdv1.CommitOffsetsRequest{Group: gc.opts.Group, MemberId: gc.member, Generation: gc.generation}
	for tp, off := range offsets {
		req.Offsets = append(req.Offsets, &logdv1.GroupOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	if len(req.Offsets) == 0 {
		return nil
	}
	slices.SortFunc(req.Offsets, func(a, b *logdv1.GroupOffset) int {
		return cmpTP(TopicPartition{a.Topic, a.Partition}, TopicPartition{b.Topic, b.Partition})
	})
	if err := gc.c.commitOffsets(ctx, req); err != nil {
		return err
	}
	for tp, off := range offsets {
		if p, ok := gc.owned[tp]; ok {
			p.committed = max(p.committed, off)
		}
	}
	return nil
}

// commitOwned commits the positions of owned partitions (only those in
// only, if given) that moved since their last commit. A fenced commit
// triggers a heartbeat, so the member learns its new assignment.
func (gc *GroupConsumer) commitOwned(ctx context.Context, only []TopicPartition) error {
	gc.lastCommit = gc.opts.Now()
	offsets := map[TopicPartition]int64{}
	for tp, p := range gc.owned {
		if only != nil && !slices.Contains(only, tp) {
			continue
		}
		if p.pos > p.committed && p.pos >= 0 {
			offsets[tp] = p.pos
		}
	}
	err := gc.CommitOffsets(ctx, offsets)
	if errors.Is(err, ErrStaleGeneration) || errors.Is(err, ErrUnknownMember) {
		// Our view is outdated (fenced by a reset or a move, or expired):
		// the records since the last good commit will be read again by
		// whoever owns the partitions now.
		return gc.heartbeat(ctx, nil)
	}
	return err
}

// Close commits (with auto-commit) and leaves the group, so its partitions
// move to other members at once. It is idempotent.
func (gc *GroupConsumer) Close(ctx context.Context) error {
	if gc.closed {
		return nil
	}
	gc.closed = true
	var errs []error
	if gc.joined {
		if !gc.opts.ManualCommit {
			if err := gc.commitOwned(ctx, nil); err != nil {
				errs = append(errs, err)
			}
		}
		if err := gc.c.leaveGroup(ctx, gc.opts.Group, gc.member); err != nil {
			errs = append(errs, err)
		}
	}
	for tp := range gc.owned {
		gc.drop(tp)
	}
	if gc.fcancel != nil {
		gc.fcancel()
	}
	gc.wg.Wait()
	return errors.Join(errs...)
}
