package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/internal/histcheck"
	"github.com/logd-dev/logd/server"
)

// The nemesis tests' workloads. Every client makes one call at a time and
// records it in one history (internal/histcheck): appends with and without
// idempotency keys through the Go client, reads of single offsets from the
// node that leads and from one fixed node, consumer group joins, commits
// and committed-offset reads, queue claims, acks, nacks and extends; after
// healing, keyed re-sends, the queue's final states and a scan of every
// partition on every node.

// The workloads' topics and groups.
const (
	wTopic = "nt" // appends and reads
	wParts = 3
	gTopic = "ng" // the consumer group's offsets
	gParts = 2
	gGroup = "g"
	// gEnd is how many records each partition of gTopic holds, so commits
	// never pass the end.
	gEnd   = 4000
	qTopic = "nq" // the queue
	qParts = 2
	qGroup = "w"
	// qRecords are produced before the faults, and more by a producer
	// during them; every 20th is poison (a worker nacks it permanently).
	qRecords = 100
	// gSession is the group members' session timeout: shorter than the
	// longer faults, so members expire and the group rebalances.
	gSession = 3 * time.Second
	// qLease is the queue group's lease: shorter than a pause, so leases
	// of a paused node's clients expire and records are redelivered.
	qLease = time.Second
)

// workload runs the nemesis workloads against a cluster.
type workload struct {
	t   *testing.T
	c   *e2e.Cluster
	rec *histcheck.Recorder
	// seed draws the clients' choices; each client has its own source.
	seed    uint64
	clients atomic.Int32
	stop    chan struct{}
	wg      sync.WaitGroup

	// oks counts ok appends.
	oks atomic.Int64
	// segmentBytes, if set, is the append topic's segment.bytes.
	segmentBytes string

	// groups, when the append topic is placed over data groups, is each
	// of its partitions' data group (read after prepare): a leader read
	// of a partition is then a read at its group's leader.
	groups []uint64

	mu sync.Mutex
	// keyed holds the keyed appends that got an ok answer, for the
	// re-sends after healing; guarded by mu.
	keyed []keyedAppend
}

// keyedAppend is an append with an idempotency key that got an ok answer.
type keyedAppend struct {
	key, value string
	partition  int32
}

func newWorkload(t *testing.T, c *e2e.Cluster, seed uint64) *workload {
	return &workload{t: t, c: c, rec: histcheck.NewRecorder(), seed: seed, stop: make(chan struct{})}
}

// goClient is one workload client on the Go client. It keeps the errors
// of the attempts the Go client retried during the current call, so that
// the error a call records tells what each attempt saw.
type goClient struct {
	*client.Client
	id      int
	rng     *rand.Rand
	retried []string
}

// newClient returns a workload client whose Go client starts at node i.
func (w *workload) newClient(i int) *goClient {
	g := &goClient{id: int(w.clients.Add(1))}
	g.rng = rand.New(rand.NewPCG(w.seed, uint64(g.id)))
	// The default retry policy, which rides out an election.
	cl, err := client.New(w.c.Nodes[i%len(w.c.Nodes)].Listen, client.Options{Timeout: 2 * time.Second,
		Retry: client.RetryPolicy{OnRetry: func(e client.RetryEvent) {
			g.retried = append(g.retried, fmt.Sprintf("attempt %d: %v", e.Attempt, e.Err))
		}}})
	if err != nil {
		w.t.Fatal(err)
	}
	g.Client = cl
	return g
}

// begin starts a call: it forgets the attempts of the last one.
func (g *goClient) begin() { g.retried = g.retried[:0] }

// trail adds the retried attempts' errors to a call's error.
func (g *goClient) trail(err error) error {
	if err == nil || len(g.retried) == 0 {
		return err
	}
	return fmt.Errorf("%w (after retried %s)", err, strings.Join(g.retried, "; "))
}

// stopped reports whether the workload is to stop; otherwise it pauses
// for the client's think time.
func (w *workload) stopped(think time.Duration) bool {
	select {
	case <-w.stop:
		return true
	case <-time.After(think):
		return false
	}
}

// definite reports whether err is one the server answers only when the
// call changed nothing, and the histcheck reason to record. The Go
// client's ErrOutcomeUnknown comes first: it may wrap a last attempt's
// definite error, which says nothing of an earlier attempt.
func definite(err error) (bool, histcheck.Reason) {
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown):
		return false, ""
	case errors.Is(err, client.ErrStaleToken):
		return true, histcheck.Stale
	case errors.Is(err, client.ErrStaleGeneration), errors.Is(err, client.ErrUnknownMember):
		return true, histcheck.Fenced
	case errors.Is(err, client.ErrNotLeader), errors.Is(err, client.ErrOverloaded),
		errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrUnknownTopic),
		errors.Is(err, client.ErrUnknownPartition), errors.Is(err, client.ErrRecordTooLarge),
		errors.Is(err, client.ErrIdempotencyConflict), errors.Is(err, client.ErrUnknownGroup):
		return true, ""
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch e2e.ReasonOf(ce) {
		case logdv1.Reason_REASON_STALE_TOKEN:
			return true, histcheck.Stale
		case logdv1.Reason_REASON_STALE_GENERATION, logdv1.Reason_REASON_UNKNOWN_MEMBER:
			return true, histcheck.Fenced
		case logdv1.Reason_REASON_NOT_LEADER, logdv1.Reason_REASON_OVERLOADED, logdv1.Reason_REASON_INVALID_ARGUMENT,
			logdv1.Reason_REASON_UNKNOWN_TOPIC, logdv1.Reason_REASON_UNKNOWN_PARTITION, logdv1.Reason_REASON_UNKNOWN_GROUP:
			return true, ""
		}
	}
	return false, ""
}

// outcome is how end ends a call that returned err.
func outcome(err error) histcheck.Outcome {
	if err == nil {
		return histcheck.OK
	}
	if ok, _ := definite(err); ok {
		return histcheck.Failed
	}
	return histcheck.Unknown
}

// end ends a call by err: ok (set fills in the outputs), failed when the
// server guarantees nothing happened, unknown otherwise.
func end(c *histcheck.Call, err error, set func(*histcheck.Op)) {
	if err == nil {
		c.OK(set)
		return
	}
	if ok, reason := definite(err); ok {
		c.Fail(reason, err)
		return
	}
	c.Unknown(err)
}

// prepare creates the topics and groups and fills the group and queue
// topics; it runs before the faults.
func (w *workload) prepare(ctx context.Context) {
	t := w.t
	var config map[string]string
	if w.segmentBytes != "" {
		config = map[string]string{"segment.bytes": w.segmentBytes}
	}
	e2e.CreateTopic(t, ctx, w.c.Nodes[0], wTopic, wParts, config)
	dt, err := w.c.Nodes[0].RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: wTopic}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dt.Msg.Partitions {
		if p.DataGroup != 0 {
			w.groups = append(w.groups, p.DataGroup)
		}
	}
	if len(w.groups) != 0 && len(w.groups) != wParts {
		t.Fatalf("%s: %d of %d partitions in data groups", wTopic, len(w.groups), wParts)
	}
	e2e.CreateTopic(t, ctx, w.c.Nodes[0], gTopic, gParts, nil)
	e2e.CreateTopic(t, ctx, w.c.Nodes[0], qTopic, qParts, nil)
	cl, err := client.New(w.c.Nodes[0].Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(gParts) {
		for n := 0; n < gEnd; n += 500 {
			recs := make([]client.Record, 500)
			for i := range recs {
				recs[i] = client.Record{Partition: &p, Value: []byte("x")}
			}
			if _, err := cl.Produce(ctx, gTopic, recs); err != nil {
				t.Fatal(err)
			}
		}
	}
	for n := 0; n < qRecords; n += 50 {
		recs := make([]client.Record, 50)
		for i := range recs {
			recs[i] = job("j", n+i)
		}
		if _, err := cl.Produce(ctx, qTopic, recs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.CreateQueueGroup(ctx, qTopic, qGroup, client.QueueGroupConfig{Lease: qLease, MaxDeliveries: 50, MaxInFlight: 20}, false); err != nil {
		t.Fatal(err)
	}
}

// job is the n-th queue record of a producer; every 20th is poison.
func job(producer string, n int) client.Record {
	v := fmt.Sprintf("%s-job-%d", producer, n)
	if n%20 == 7 {
		v = fmt.Sprintf("%s-poison-%d", producer, n)
	}
	return client.Record{Key: []byte(v), Value: []byte(v)}
}

// jobProducer adds queue records during the run, so claims, leases and
// acks meet the faults. Its appends are not part of the history: the
// queue's final states are read from the partitions themselves.
func (w *workload) jobProducer(ctx context.Context) {
	cl := w.newClient(1)
	defer cl.Close()
	for n := 0; !w.stopped(time.Duration(150+cl.rng.IntN(200)) * time.Millisecond); n++ {
		cl.Produce(ctx, qTopic, []client.Record{job(fmt.Sprintf("p%d", cl.id), n)})
	}
}

// start starts every client.
func (w *workload) start(ctx context.Context) {
	goClient := func(f func()) {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); f() }()
	}
	for i := range 3 {
		goClient(func() { w.appender(ctx, i, false) })
	}
	for i := range 2 {
		goClient(func() { w.appender(ctx, i+1, true) })
	}
	for i := range 2 {
		goClient(func() { w.reader(ctx, i, readLeader) })
	}
	for i := range 2 {
		goClient(func() { w.reader(ctx, i+1, readFollower) })
	}
	goClient(func() { w.reader(ctx, 2, readConsistent) })
	for i := range 2 {
		goClient(func() { w.member(ctx, i) })
	}
	goClient(func() { w.committedReader(ctx, 0, true) })
	goClient(func() { w.committedReader(ctx, 2, false) })
	for i := range 2 {
		goClient(func() { w.queueWorker(ctx, i, true) })
	}
	goClient(func() { w.jobProducer(ctx) })
}

// halt stops every client and waits for them.
func (w *workload) halt() {
	close(w.stop)
	w.wg.Wait()
}

// acked counts ok appends so far.
func (w *workload) acked() int { return int(w.oks.Load()) }

// waitAcks waits until n more appends than now are ok.
func (w *workload) waitAcks(ctx context.Context, what string, n int) {
	w.t.Helper()
	target := w.acked() + n
	e2e.WaitFor(w.t, ctx, what, func() bool { return w.acked() >= target })
}

// appender appends unique values to random partitions through the Go
// client. A keyed appender gives each value an idempotency key and, when
// a call's outcome is unknown, sends the same key and value again (up to
// five times) before it moves on.
func (w *workload) appender(ctx context.Context, node int, keyed bool) {
	cl := w.newClient(node)
	defer cl.Close()
	for n := 0; !w.stopped(time.Duration(cl.rng.IntN(10)) * time.Millisecond); n++ {
		p := int32(cl.rng.IntN(wParts))
		v := fmt.Sprintf("c%d-%d", cl.id, n)
		key := ""
		if keyed {
			key = "k" + v
		}
		for try := 0; try < 5; try++ {
			got := w.append(ctx, cl, p, v, key)
			if got == histcheck.OK && keyed {
				w.mu.Lock()
				w.keyed = append(w.keyed, keyedAppend{key: key, value: v, partition: p})
				w.mu.Unlock()
			}
			if !keyed || got != histcheck.Unknown || w.stopped(50*time.Millisecond) {
				break
			}
		}
	}
}

// append makes one append call and records it; it returns the outcome.
func (w *workload) append(ctx context.Context, cl *goClient, p int32, v, key string) histcheck.Outcome {
	c := w.rec.Begin(histcheck.Op{Kind: histcheck.Append, Client: cl.id, Leader: true, Topic: wTopic, Partition: p, Value: v, Key: key})
	cl.begin()
	res, err := cl.Produce(ctx, wTopic, []client.Record{{Value: []byte(v), Partition: &p, IdempotencyKey: key}})
	end(c, cl.trail(err), func(op *histcheck.Op) { op.Offset, op.Duplicate = res[0].Offset, res[0].Duplicate })
	if err == nil {
		w.oks.Add(1)
	}
	return outcome(err)
}

// resendKeyed sends again, after healing, up to n of the keyed appends
// that got an ok answer: each must answer its original offset, marked a
// duplicate.
func (w *workload) resendKeyed(ctx context.Context, n int) {
	w.mu.Lock()
	keyed := w.keyed
	w.mu.Unlock()
	cl := w.newClient(0)
	defer cl.Close()
	for range min(n, len(keyed)) {
		k := keyed[cl.rng.IntN(len(keyed))]
		w.append(ctx, cl, k.partition, k.value, k.key)
	}
}

// leaderOf returns the index of the node that reports itself the ready
// leader of the highest term, or -1.
func (w *workload) leaderOf(ctx context.Context) int {
	best, _ := w.leaderTerm(ctx)
	return best
}

// leaderTerm is leaderOf with the leader's term.
func (w *workload) leaderTerm(ctx context.Context) (int, uint64) {
	best, term := -1, uint64(0)
	for i, nd := range w.c.Nodes {
		st, err := nd.Status(ctx)
		if err == nil && st.State == "Leader" && st.Ready && st.Term >= term {
			best, term = i, st.Term
		}
	}
	return best, term
}

// stillLeads reports whether nd, after a read, still leads in term, the
// term it led in when it was looked up. Nodes serve reads from their
// applied state without asking whether they lead (server/forward.go): a
// leader that handed over its leadership (a transfer) since the look-up
// answers as a follower would, and its read is recorded as one.
func (w *workload) stillLeads(ctx context.Context, nd *e2e.Node, term uint64) bool {
	st, err := nd.Status(ctx)
	return err == nil && st.State == "Leader" && st.Term == term
}

// partitionLeader is leaderTerm for partition p of the append topic: the
// node that leads its data group (in the highest term a replica reports)
// when it is placed over data groups, else the node that leads.
func (w *workload) partitionLeader(ctx context.Context, p int32) (int, uint64) {
	if w.groups == nil {
		return w.leaderTerm(ctx)
	}
	return w.groupLeader(ctx, w.groups[p])
}

// groupLeader is leaderTerm for Raft group g: the node that leads data
// group g (in the highest term a replica reports), or the meta group's
// leader for g 0.
func (w *workload) groupLeader(ctx context.Context, g uint64) (int, uint64) {
	if g == 0 {
		return w.leaderTerm(ctx)
	}
	best, term := -1, uint64(0)
	for i, nd := range w.c.Nodes {
		st, err := nd.Status(ctx)
		if err != nil {
			continue
		}
		for _, dg := range st.DataGroups {
			if dg.Id == g && dg.State == "Leader" && dg.Term >= term {
				best, term = i, dg.Term
			}
		}
	}
	return best, term
}

// stillLeadsPartition is stillLeads for partition p of the append topic:
// nd still leads p's data group in term, when it is placed over them.
func (w *workload) stillLeadsPartition(ctx context.Context, nd *e2e.Node, p int32, term uint64) bool {
	if w.groups == nil {
		return w.stillLeads(ctx, nd, term)
	}
	return w.stillLeadsGroup(ctx, nd, w.groups[p], term)
}

// stillLeadsGroup is stillLeads for Raft group g (the meta group for 0).
func (w *workload) stillLeadsGroup(ctx context.Context, nd *e2e.Node, g uint64, term uint64) bool {
	if g == 0 {
		return w.stillLeads(ctx, nd, term)
	}
	st, err := nd.Status(ctx)
	if err != nil {
		return false
	}
	for _, dg := range st.DataGroups {
		if dg.Id == g {
			return dg.State == "Leader" && dg.Term == term
		}
	}
	return false
}

// readKind is what reads a reader makes.
type readKind int

const (
	// readLeader reads from the node that leads.
	readLeader readKind = iota
	// readFollower reads from one node, whichever leads.
	readFollower
	// readConsistent reads from one node with server.ConsistentReadHeader.
	readConsistent
)

// reader reads single offsets of random partitions: from the node that
// leads (readLeader: leader reads, which must be linearizable; the leader,
// of the partition's data group when the topic is placed over them, is
// looked up again every 200 ms and after a failure, and a read is
// recorded as a leader read only if its node still leads in the same term
// after it, stillLeads), or always from node i (readFollower: follower
// reads, which may trail but never go back; readConsistent: consistent
// reads, recorded as leader reads, since they must be linearizable
// wherever they are served: docs/architecture.md, "Read guarantees").
// Offsets are drawn up to a little past the end last seen, so some reads
// are out of range.
func (w *workload) reader(ctx context.Context, node int, kind readKind) {
	leader, consistent := kind == readLeader, kind == readConsistent
	id := int(w.clients.Add(1))
	rng := rand.New(rand.NewPCG(w.seed, uint64(id)))
	ends := make([]int64, wParts)
	// Where leader reads go, per partition (the same node for all unless
	// the topic is placed over data groups).
	type lookup struct {
		node   int
		term   uint64
		looked time.Time
	}
	targets := make([]lookup, wParts)
	target := node
	// led says whether an ok read of partition p at node i counts as a
	// leader read.
	led := func(i int, p int32) bool {
		if consistent {
			return true
		}
		if leader && !w.stillLeadsPartition(ctx, w.c.Nodes[i], p, targets[p].term) {
			targets[p].looked = time.Time{}
			return false
		}
		return leader
	}
	for !w.stopped(time.Duration(5+rng.IntN(10)) * time.Millisecond) {
		p := int32(rng.IntN(wParts))
		if leader {
			if time.Since(targets[p].looked) > 200*time.Millisecond {
				n, term := w.partitionLeader(ctx, p)
				targets[p] = lookup{node: n, term: term, looked: time.Now()}
				if n < 0 {
					targets[p].looked = time.Time{}
					continue
				}
			}
			target = targets[p].node
		}
		nd := w.c.Nodes[target]
		off := rng.Int64N(ends[p] + 2)
		c := w.rec.Begin(histcheck.Op{Kind: histcheck.Read, Client: id, Node: nd.ID, Leader: leader || consistent, Topic: wTopic, Partition: p, Offset: off})
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req := connect.NewRequest(&logdv1.FetchRequest{Topic: wTopic, Partition: p, Offset: off, MaxRecords: 1})
		if consistent {
			req.Header().Set(server.ConsistentReadHeader, "true")
		}
		resp, err := nd.RPC.Fetch(cctx, req)
		cancel()
		if err != nil {
			if info := errorInfo(err); info != nil && info.Reason == logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE && off >= info.EndOffset {
				l := led(target, p)
				c.OK(func(op *histcheck.Op) { op.OutOfRange, op.End, op.Leader = true, info.EndOffset, l })
				continue
			}
			c.Unknown(err) // a read changes nothing either way
			targets[p].looked = time.Time{}
			continue
		}
		m := resp.Msg
		ends[p] = max(ends[p], m.EndOffset)
		var val *string
		for _, r := range m.Records {
			if r.Offset == off {
				s := string(r.Value)
				val = &s
			}
		}
		switch {
		case off >= m.EndOffset:
			l := led(target, p)
			c.OK(func(op *histcheck.Op) { op.OutOfRange, op.End, op.Leader = true, m.EndOffset, l })
		case val != nil:
			l := led(target, p)
			c.OK(func(op *histcheck.Op) { op.Value, op.End, op.Leader = *val, m.EndOffset, l })
		default:
			c.Unknown(fmt.Errorf("fetch of %d below the end %d returned no record at it", off, m.EndOffset))
		}
	}
}

// member is consumer group member m<i>: it joins, heartbeats, and commits
// ever larger offsets of the partitions it owns with its generation,
// through node i and then whichever node answers.
//
// A follower forwards a write to the leader (server/forward.go), so its
// ok answer is the leader's, which the history cannot tell from its own.
// Even members therefore call directly: their calls carry the forwarded
// header, which no node forwards, so an ok answer is the node's own and
// is recorded with it (the membership checker judges it). Odd members
// call through forwarding and record no node.
func (w *workload) member(ctx context.Context, i int) {
	id := int(w.clients.Add(1))
	rng := rand.New(rand.NewPCG(w.seed, uint64(id)))
	member := fmt.Sprintf("m%d", i)
	node := i % len(w.c.Nodes)
	direct := i%2 == 0
	// who is the node to record for a call to nd.
	who := func(id string) string {
		if direct {
			return id
		}
		return ""
	}
	var gen int64
	var owned []*logdv1.AssignedPartition
	var revoke []*logdv1.GroupTopicPartition
	joined, beat := false, time.Time{}
	next := map[int32]int64{}
	// assignment records a join or heartbeat answer.
	assignment := func(c *histcheck.Call, a *logdv1.GroupAssignment, err error) {
		if err == nil && a == nil {
			err = errors.New("no assignment in the answer")
		}
		end(c, err, func(op *histcheck.Op) {
			op.Generation = a.Generation
			for _, p := range a.Partitions {
				op.Assigned = append(op.Assigned, histcheck.TopicPartition{Topic: p.Topic, Partition: p.Partition})
			}
		})
		if err != nil {
			joined = false
			node = (node + 1) % len(w.c.Nodes)
			return
		}
		gen, owned, revoke, joined, beat = a.Generation, a.Partitions, a.Revoke, true, time.Now()
		for _, p := range owned {
			next[p.Partition] = max(next[p.Partition], p.CommittedOffset+1)
		}
	}
	for !w.stopped(time.Duration(10+rng.IntN(20)) * time.Millisecond) {
		nd := w.c.Nodes[node]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		switch {
		case !joined:
			c := w.rec.Begin(histcheck.Op{Kind: histcheck.Join, Client: id, Node: who(nd.ID), Group: gGroup, Member: member})
			resp, err := nd.RPC.JoinGroup(cctx, req(direct, &logdv1.JoinGroupRequest{Group: gGroup, MemberId: member,
				Topics: []string{gTopic}, SessionTimeoutMs: int32(gSession.Milliseconds())}))
			var a *logdv1.GroupAssignment
			if err == nil {
				a = resp.Msg.Assignment
			}
			assignment(c, a, err)
		case time.Since(beat) > gSession/4 || len(revoke) > 0:
			c := w.rec.Begin(histcheck.Op{Kind: histcheck.Join, Client: id, Node: who(nd.ID), Group: gGroup, Member: member})
			resp, err := nd.RPC.GroupHeartbeat(cctx, req(direct, &logdv1.GroupHeartbeatRequest{Group: gGroup, MemberId: member, Released: revoke}))
			var a *logdv1.GroupAssignment
			if err == nil {
				a = resp.Msg.Assignment
			}
			assignment(c, a, err)
		case len(owned) > 0:
			p := owned[rng.IntN(len(owned))].Partition
			off := min(next[p], gEnd)
			next[p]++
			c := w.rec.Begin(histcheck.Op{Kind: histcheck.Commit, Client: id, Node: who(nd.ID), Group: gGroup, Member: member,
				Generation: gen, Topic: gTopic, Partition: p, Offset: off})
			_, err := nd.RPC.CommitOffsets(cctx, req(direct, &logdv1.CommitOffsetsRequest{Group: gGroup, MemberId: member,
				Generation: gen, Offsets: []*logdv1.GroupOffset{{Topic: gTopic, Partition: p, Offset: off}}}))
			end(c, err, nil)
			if ok, reason := definite(err); ok && reason == histcheck.Fenced {
				joined = false
			} else if err != nil {
				node = (node + 1) % len(w.c.Nodes)
			}
		}
		cancel()
	}
}

// committedReader reads the group's committed offset of a random
// partition: from the node that leads the group's home, the Raft group
// holding its state (leader reads, kept only if the node still leads it
// in the same term after the read, as reader does), or always from node
// i (follower reads). The home is what a describe answered last (0, the
// meta group, until one answered).
func (w *workload) committedReader(ctx context.Context, node int, leader bool) {
	id := int(w.clients.Add(1))
	rng := rand.New(rand.NewPCG(w.seed, uint64(id)))
	target, looked, term := node, time.Time{}, uint64(0)
	var home uint64
	for !w.stopped(time.Duration(20+rng.IntN(20)) * time.Millisecond) {
		if leader && time.Since(looked) > 200*time.Millisecond {
			target, term = w.groupLeader(ctx, home)
			looked = time.Now()
			if target < 0 {
				looked = time.Time{}
				continue
			}
		}
		nd := w.c.Nodes[target]
		p := int32(rng.IntN(gParts))
		c := w.rec.Begin(histcheck.Op{Kind: histcheck.FetchCommitted, Client: id, Node: nd.ID, Leader: leader, Group: gGroup, Topic: gTopic, Partition: p})
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := nd.RPC.DescribeGroup(cctx, connect.NewRequest(&logdv1.DescribeGroupRequest{Group: gGroup}))
		cancel()
		if err != nil {
			c.Unknown(err) // a read changes nothing either way
			looked = time.Time{}
			continue
		}
		committed := histcheck.NoOffset
		for _, gp := range resp.Msg.Partitions {
			if gp.Topic == gTopic && gp.Partition == p && gp.CommittedOffset >= 0 {
				committed = gp.CommittedOffset
			}
		}
		l := leader
		if leader && (resp.Msg.Home != home || !w.stillLeadsGroup(ctx, nd, home, term)) {
			// Read where the group's home was not known yet, or from a
			// node that lost its leadership: a follower read.
			l, looked, home = false, time.Time{}, resp.Msg.Home
		}
		c.OK(func(op *histcheck.Op) { op.Offset, op.Leader = committed, l })
	}
}

// queueWorker claims records of the queue through the Go client, extends
// some leases, acks each record (permanently nacks the poison ones), and
// repeats an ack whose outcome is unknown until it is answered. Now and
// then it stalls past the lease before it acks, as a slow worker would:
// that ack must be refused once the lease has run out.
func (w *workload) queueWorker(ctx context.Context, node int, stall bool) {
	cl := w.newClient(node)
	defer cl.Close()
	id, rng := cl.id, cl.rng
	for !w.stopped(time.Duration(5+rng.IntN(20)) * time.Millisecond) {
		c := w.rec.Begin(histcheck.Op{Kind: histcheck.Claim, Client: id, Group: qGroup, Topic: qTopic})
		cl.begin()
		res, err := cl.Claim(ctx, client.ClaimRequest{Topic: qTopic, Group: qGroup, MaxRecords: 8, MaxWait: 100 * time.Millisecond})
		err = cl.trail(err)
		end(c, err, func(op *histcheck.Op) {
			for _, j := range res.Jobs {
				op.Deliveries = append(op.Deliveries, histcheck.Delivery{Topic: j.Topic, Partition: j.Partition, Offset: j.Offset,
					Token: j.Token, Count: j.Delivery, Deadline: w.rec.At(j.LeaseDeadline)})
			}
		})
		if err != nil {
			continue
		}
		for _, j := range res.Jobs {
			op := histcheck.Op{Client: id, Group: qGroup, Topic: qTopic, Partition: j.Partition, Offset: j.Offset, Token: j.Token}
			if rng.IntN(5) == 0 {
				op.Kind = histcheck.Extend
				c := w.rec.Begin(op)
				cl.begin()
				rs, err := cl.Extend(ctx, qTopic, qGroup, qLease, j.Token)
				end(c, cl.trail(tokenErr(err)), func(op *histcheck.Op) { op.Deadline = w.rec.At(rs[0].LeaseDeadline) })
			}
			if stall && rng.IntN(20) == 0 && w.stopped(qLease+300*time.Millisecond) {
				return
			}
			if strings.Contains(string(j.Value), "-poison-") {
				op.Kind, op.Permanent = histcheck.Nack, true
				c := w.rec.Begin(op)
				cl.begin()
				_, err := cl.Nack(ctx, qTopic, qGroup, client.Nack{Token: j.Token, Permanent: true, Error: "poison"})
				end(c, cl.trail(tokenErr(err)), nil)
				continue
			}
			op.Kind = histcheck.Ack
			for try := 0; try < 10; try++ {
				c := w.rec.Begin(op)
				cl.begin()
				rs, err := cl.Ack(ctx, qTopic, qGroup, j.Token)
				end(c, cl.trail(tokenErr(err)), func(op *histcheck.Op) {
					if len(rs) > 0 {
						op.Duplicate = rs[0].Duplicate
					}
				})
				if ok, _ := definite(tokenErr(err)); err == nil || ok || w.stopped(50*time.Millisecond) {
					break
				}
			}
		}
	}
}

// req wraps msg in a request; a direct one carries the forwarded header,
// so the node it is sent to answers it itself.
func req[T any](direct bool, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	if direct {
		r.Header().Set(server.ForwardedHeader, "nemesis-workload")
	}
	return r
}

// errorInfo returns the ErrorInfo detail of an RPC error, if any.
func errorInfo(err error) *logdv1.ErrorInfo {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*logdv1.ErrorInfo); ok {
				return info
			}
		}
	}
	return nil
}

// tokenErr turns a TokenError for the one token of a call into its
// reason's error, so a stale token is a definite failure.
func tokenErr(err error) error {
	var te *client.TokenError
	if errors.As(err, &te) {
		for _, e := range te.Refused {
			return e
		}
	}
	return err
}

// drainQueue waits (up to a minute) until every queue record is acked or
// dead-lettered, letting fresh workers, which do not stall, finish what
// is left.
func (w *workload) drainQueue(ctx context.Context) {
	w.stop = make(chan struct{})
	for i := range 4 {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.queueWorker(ctx, i, false) }()
	}
	defer w.halt()
	cl := w.newClient(0)
	defer cl.Close()
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for dctx.Err() == nil {
		d, err := cl.DescribeQueueGroup(dctx, qTopic, qGroup)
		if err == nil {
			done := true
			for _, p := range d.Partitions {
				if p.DoneOffset != p.EndOffset || p.Ready+p.InFlight+p.Delayed+p.DeadPending != 0 {
					done = false
				}
			}
			if done {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.t.Errorf("the queue did not drain within a minute of healing")
}

// finalQueue records, from node nd, the final state of every record of
// the queue's partitions (recordQueueFinal).
func (w *workload) finalQueue(ctx context.Context, nd *e2e.Node) {
	recordQueueFinal(ctx, w.t, w.rec, nd, qTopic, qGroup)
}

// recordQueueFinal records in rec, from node nd, the final state of every
// record of queue group group on topic: dead-lettered (with how many
// dead letters name it), acked (below the done offset, and no dead
// letter), or unfinished.
func recordQueueFinal(ctx context.Context, t *testing.T, rec *histcheck.Recorder, nd *e2e.Node, topic, group string) {
	start := rec.Now()
	dlq := topic + "." + group + ".dlq"
	dt, err := nd.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: dlq}))
	dead := map[[2]int64]int{}
	if err == nil {
		for part, recs := range nd.ReadAll(ctx, dlq, int32(len(dt.Msg.Partitions))) {
			for _, r := range recs {
				d, ok := client.ParseDeadLetter(client.FetchedRecord{Partition: part, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: fetchedHeaders(r)})
				if !ok {
					t.Errorf("%s: dead-letter record %d/%d without dead-letter headers", nd.ID, part, r.Offset)
					continue
				}
				dead[[2]int64{int64(d.OriginPartition), d.OriginOffset}]++
			}
		}
	}
	d, err := nd.RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: topic, Group: group}))
	if err != nil {
		t.Fatalf("%s: describe queue group: %v", nd.ID, err)
	}
	ret := rec.Now()
	for _, p := range d.Msg.Partitions {
		for off := int64(0); off < p.EndOffset; off++ {
			k := [2]int64{int64(p.Partition), off}
			op := histcheck.Op{Kind: histcheck.QueueFinal, Client: -1, Node: nd.ID, Call: start, Return: ret, Outcome: histcheck.OK,
				Group: group, Topic: topic, Partition: p.Partition, Offset: off, DeadLetters: dead[k]}
			switch {
			case dead[k] > 0:
				op.State = histcheck.DeadLettered
			case off < p.DoneOffset:
				op.State = histcheck.Acked
			default:
				op.State = histcheck.Unfinished
			}
			rec.Add(op)
		}
	}
}

// scan records every node's copy of every partition of the append topic.
func (w *workload) scan(ctx context.Context) {
	for _, nd := range w.c.Nodes {
		start := w.rec.Now()
		got := nd.ReadAll(ctx, wTopic, wParts)
		ret := w.rec.Now()
		for p := range int32(wParts) {
			op := histcheck.Op{Kind: histcheck.Scan, Client: -1, Node: nd.ID, Call: start, Return: ret, Outcome: histcheck.OK, Topic: wTopic, Partition: p}
			for _, r := range got[p] {
				op.Records = append(op.Records, histcheck.Record{Offset: r.Offset, Value: string(r.Value)})
			}
			w.rec.Add(op)
		}
	}
}

// acks returns the ok appends and every attempted value, for the
// harness's Cluster.CheckEveryNode.
func (w *workload) acks() ([]e2e.Ack, map[string]bool) {
	var out []e2e.Ack
	attempted := map[string]bool{}
	seen := map[string]bool{}
	for _, op := range w.rec.Ops() {
		if op.Kind != histcheck.Append {
			continue
		}
		attempted[op.Value] = true
		if op.Outcome == histcheck.OK && !seen[op.Value] {
			seen[op.Value] = true
			out = append(out, e2e.Ack{Partition: op.Partition, Offset: op.Offset, Value: op.Value})
		}
	}
	return out, attempted
}
