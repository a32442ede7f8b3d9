package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// Consumer-group offsets and queue leases across leader kills:
// no committed offset moves backwards, no acked queue record is delivered
// again, no queue record is lost. Both workloads run at once on one
// cluster while its leader is SIGKILLed.

// commitLog is a group member's history of offset commits: each commit
// is recorded as it ends (acknowledged, refused, or unknown).
type commitLog struct {
	group string
	mu    sync.Mutex
	// acked is the last acknowledged commit per partition; attempted the
	// highest offset ever sent (an unknown commit may have applied).
	acked, attempted     map[int32]int64
	calls, oks, unknowns int
	notLeader            int
	rejoins              int
	violations           []string
}

func (cl *commitLog) lastAcked() map[int32]int64 {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range cl.acked {
		out[p] = o
	}
	return out
}

func (cl *commitLog) violate(format string, args ...any) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.violations = append(cl.violations, fmt.Sprintf(format, args...))
}

func (cl *commitLog) okCount() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.oks
}

// runCommitter is one group member committing ever larger offsets to all
// partitions of topic, one commit at a time, rotating through the nodes on
// failures, until stop is closed; then it repeats its last commit until it
// is acknowledged, so the last acknowledged commit is the group's final
// state.
func runCommitter(ctx context.Context, c *e2e.Cluster, cl *commitLog, topic string, parts int32, end int64, stop <-chan struct{}) {
	member := "m-" + cl.group
	node := 0
	var gen int64
	next := map[int32]int64{}
	join := func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := c.Nodes[node].RPC.JoinGroup(cctx, connect.NewRequest(&logdv1.JoinGroupRequest{
			Group: cl.group, MemberId: member, Topics: []string{topic}, SessionTimeoutMs: 60_000}))
		if err != nil {
			node = (node + 1) % len(c.Nodes)
			return false
		}
		a := resp.Msg.Assignment
		gen = a.Generation
		acked := cl.lastAcked()
		cl.mu.Lock()
		cl.rejoins++
		cl.mu.Unlock()
		for _, p := range a.Partitions {
			if a, ok := acked[p.Partition]; ok && p.CommittedOffset < a {
				cl.violate("%s: join on %s reports %d committed in partition %d, below the acked %d", cl.group, c.Nodes[node].ID, p.CommittedOffset, p.Partition, acked[p.Partition])
			}
			next[p.Partition] = max(next[p.Partition], p.CommittedOffset+1, acked[p.Partition]+1)
		}
		return len(a.Partitions) == int(parts)
	}
	for !join() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	stopping := false
	var pending *logdv1.CommitOffsetsRequest // the last commit, while it is not acknowledged
	for {
		if !stopping {
			select {
			case <-stop:
				stopping = true
			default:
			}
		}
		if stopping && pending == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		req := pending
		if req == nil {
			req = &logdv1.CommitOffsetsRequest{Group: cl.group, MemberId: member}
			for p := range parts {
				req.Offsets = append(req.Offsets, &logdv1.GroupOffset{Topic: topic, Partition: p, Offset: min(next[p], end)})
				next[p]++
			}
		}
		req.Generation = gen
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Nodes[node].RPC.CommitOffsets(cctx, connect.NewRequest(req))
		cancel()
		cl.mu.Lock()
		cl.calls++
		for _, o := range req.Offsets {
			cl.attempted[o.Partition] = max(cl.attempted[o.Partition], o.Offset)
		}
		if err == nil {
			cl.oks++
			for _, o := range req.Offsets {
				if o.Offset < cl.acked[o.Partition] {
					cl.violations = append(cl.violations, fmt.Sprintf("%s: test bug: commit %d below acked %d", cl.group, o.Offset, cl.acked[o.Partition]))
				}
				cl.acked[o.Partition] = o.Offset
			}
			pending = nil
			cl.mu.Unlock()
			continue
		}
		var ce *connect.Error
		reason := logdv1.Reason_REASON_UNSPECIFIED
		if errors.As(err, &ce) {
			reason = e2e.ReasonOf(ce)
		}
		switch reason {
		case logdv1.Reason_REASON_STALE_GENERATION, logdv1.Reason_REASON_UNKNOWN_MEMBER:
			// Refused: nothing changed. Rejoin and continue from the
			// committed offsets.
			cl.mu.Unlock()
			pending = nil
			for !join() && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		// Unknown (or refused as not the leader): the same commit is sent
		// again, possibly through another node.
		if reason == logdv1.Reason_REASON_NOT_LEADER {
			cl.notLeader++
		} else {
			cl.unknowns++
		}
		pending = req
		cl.mu.Unlock()
		node = (node + 1) % len(c.Nodes)
		time.Sleep(20 * time.Millisecond)
	}
}

// offsetSampler reads every group's committed offsets from every ready
// node and records a violation when a node's value is below one it showed
// before, or the value read at the leader of the group's home is below the
// commit acknowledged before the read started.
type offsetSampler struct {
	mu         sync.Mutex
	seen       map[string]int64 // node/group/partition -> highest committed shown
	samples    int
	violations []string
}

// leadsHome reports whether the node whose status is st led the group's
// home when it answered: the meta group (home 0) or the data group the
// group's name hashed to. Only the home's leader reads it linearizably;
// another node's replica of the home may trail it (docs/architecture.md,
// "Consumer groups").
func leadsHome(st *logdv1.StatusResponse, home uint64) bool {
	if home == 0 {
		return st.State == "Leader"
	}
	for _, g := range st.DataGroups {
		if g.Id == home {
			return g.State == "Leader"
		}
	}
	return false
}

func sample(ctx context.Context, c *e2e.Cluster, s *offsetSampler, logs []*commitLog) {
	for _, nd := range c.Nodes {
		before := map[string]map[int32]int64{}
		for _, cl := range logs {
			before[cl.group] = cl.lastAcked()
		}
		st, err := nd.Status(ctx)
		if err != nil || !st.Ready {
			continue
		}
		for _, cl := range logs {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := nd.RPC.DescribeGroup(cctx, connect.NewRequest(&logdv1.DescribeGroupRequest{Group: cl.group}))
			cancel()
			if err != nil {
				continue
			}
			s.mu.Lock()
			s.samples++
			for _, p := range resp.Msg.Partitions {
				key := fmt.Sprintf("%s/%s/%d", nd.ID, cl.group, p.Partition)
				if prev, ok := s.seen[key]; ok && p.CommittedOffset < prev {
					s.violations = append(s.violations, fmt.Sprintf("%s: committed offset went backwards from %d to %d", key, prev, p.CommittedOffset))
				}
				s.seen[key] = max(s.seen[key], p.CommittedOffset)
				if a, ok := before[cl.group][p.Partition]; ok && leadsHome(st, resp.Msg.Home) && p.CommittedOffset < a {
					s.violations = append(s.violations, fmt.Sprintf("%s (leader): committed %d, but %d was acknowledged before the read", key, p.CommittedOffset, before[cl.group][p.Partition]))
				}
			}
			s.mu.Unlock()
		}
	}
}

// qrecord is what the workers saw of one queue record.
type qrecord struct {
	value      string
	poison     bool
	deliveries []int // delivery numbers of the claims that returned it
	// ackedAt are the delivery numbers whose ack was acknowledged.
	ackedAt []int
	nacks   int
}

// queueLedger is the workers' shared history, by "partition/offset".
type queueLedger struct {
	mu                           sync.Mutex
	recs                         map[string]*qrecord
	claims, claimErrs            int
	ackCalls, ackOK, ackUnknown  int
	staleAcks, nackCalls, nackOK int
}

func (q *queueLedger) acked() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, r := range q.recs {
		if len(r.ackedAt) > 0 {
			n++
		}
	}
	return n
}

// finished counts records acked or permanently nacked (the poison ones).
func (q *queueLedger) finished() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.finishedLocked()
}

// finishedLocked is finished with q.mu held.
func (q *queueLedger) finishedLocked() int {
	n := 0
	for _, r := range q.recs {
		if len(r.ackedAt) > 0 || (r.poison && r.nacks > 0) {
			n++
		}
	}
	return n
}

// runQueueWorker claims and acks (or, for poison records, permanently
// nacks) until stop is closed. An ack whose outcome is unknown is sent
// again until it is answered: accepted (maybe as a duplicate) or stale.
func runQueueWorker(ctx context.Context, t *testing.T, seed, topic, group string, q *queueLedger, stop <-chan struct{}) {
	cl, err := client.New(seed, client.Options{Timeout: 2 * time.Second,
		Retry: client.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}})
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	for {
		select {
		case <-stop:
			return
		default:
		}
		res, err := cl.Claim(ctx, client.ClaimRequest{Topic: topic, Group: group, MaxRecords: 4, MaxWait: 100 * time.Millisecond})
		q.mu.Lock()
		q.claims++
		if err != nil {
			q.claimErrs++
		}
		for _, j := range res.Jobs {
			r := q.recs[fmt.Sprintf("%d/%d", j.Partition, j.Offset)]
			if r == nil {
				t.Errorf("claimed %d/%d (%q), never produced", j.Partition, j.Offset, j.Value)
				continue
			}
			r.deliveries = append(r.deliveries, j.Delivery)
		}
		q.mu.Unlock()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for _, j := range res.Jobs {
			key := fmt.Sprintf("%d/%d", j.Partition, j.Offset)
			if strings.HasPrefix(string(j.Value), "poison") {
				_, err := cl.Nack(ctx, topic, group, client.Nack{Token: j.Token, Permanent: true, Error: "poison"})
				q.mu.Lock()
				q.nackCalls++
				if err == nil {
					q.nackOK++
					q.recs[key].nacks++
				}
				q.mu.Unlock()
				continue
			}
			for attempt := 0; ctx.Err() == nil; attempt++ {
				_, err := cl.Ack(ctx, topic, group, j.Token)
				q.mu.Lock()
				q.ackCalls++
				switch {
				case err == nil:
					q.ackOK++
					q.recs[key].ackedAt = append(q.recs[key].ackedAt, j.Delivery)
				case errors.Is(err, client.ErrStaleToken):
					q.staleAcks++
				default:
					q.ackUnknown++
				}
				q.mu.Unlock()
				if err == nil || errors.Is(err, client.ErrStaleToken) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// TestClusterGroupsSurviveLeaderKill: two consumer groups commit offsets
// and three queue workers claim and ack while the leader is SIGKILLed and
// restarted. Committed offsets never go backwards on any node (sampled
// during the run) and end equal to the last acknowledged commit on every
// node; every queue record ends acked exactly once or dead-lettered once,
// no record is delivered after its ack was acknowledged, none is lost.
func TestClusterGroupsSurviveLeaderKill(t *testing.T) {
	e2e.ParallelShort(t)
	kills, between := 2, 60
	if e2e.FaultLong() {
		kills, between = 8, 300
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--snapshot-threshold", "256", "--snapshot-interval", "200ms")

	// Offsets to commit: a topic with enough records that commits never
	// reach its end.
	const gparts = 3
	end := int64(1500)
	if e2e.FaultLong() {
		end = 6000
	}
	e2e.CreateTopic(t, ctx, c.Nodes[0], "g", gparts, nil)
	seed, err := client.New(c.Nodes[0].Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer seed.Close()
	for p := range int32(gparts) {
		for n := int64(0); n < end; n += 500 {
			recs := make([]client.Record, 500)
			for i := range recs {
				recs[i] = client.Record{Partition: &p, Value: []byte("x")}
			}
			if _, err := seed.Produce(ctx, "g", recs); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The queue: records produced up front, every 20th one poison.
	const qparts = 2
	queueN := 240
	if e2e.FaultLong() {
		queueN = 2000
	}
	e2e.CreateTopic(t, ctx, c.Nodes[0], "q", qparts, nil)
	q := &queueLedger{recs: map[string]*qrecord{}}
	for n := 0; n < queueN; n += 40 {
		recs := make([]client.Record, 40)
		for i := range recs {
			v := fmt.Sprintf("job-%d", n+i)
			if (n+i)%20 == 7 {
				v = fmt.Sprintf("poison-%d", n+i)
			}
			recs[i] = client.Record{Key: []byte(v), Value: []byte(v)}
		}
		res, err := seed.Produce(ctx, "q", recs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			v := string(recs[i].Value)
			q.recs[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = &qrecord{value: v, poison: strings.HasPrefix(v, "poison")}
		}
	}
	if _, err := seed.CreateQueueGroup(ctx, "q", "w", client.QueueGroupConfig{Lease: time.Second, MaxDeliveries: 50, MaxInFlight: 20}, false); err != nil {
		t.Fatal(err)
	}

	logs := []*commitLog{
		{group: "ga", acked: map[int32]int64{}, attempted: map[int32]int64{}},
		{group: "gb", acked: map[int32]int64{}, attempted: map[int32]int64{}},
	}
	sampler := &offsetSampler{seen: map[string]int64{}}
	stopCommits, stopWorkers, stopSampler := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var commitWG, workWG, sampleWG sync.WaitGroup
	for _, cl := range logs {
		commitWG.Add(1)
		go func() { defer commitWG.Done(); runCommitter(ctx, c, cl, "g", gparts, end, stopCommits) }()
	}
	for i := range 3 {
		workWG.Add(1)
		go func() { defer workWG.Done(); runQueueWorker(ctx, t, c.Nodes[i].Listen, "q", "w", q, stopWorkers) }()
	}
	sampleWG.Add(1)
	go func() {
		defer sampleWG.Done()
		for {
			select {
			case <-stopSampler:
				return
			case <-time.After(100 * time.Millisecond):
			}
			sample(ctx, c, sampler, logs)
		}
	}()

	progress := func() int { return logs[0].okCount() + logs[1].okCount() + q.finished() }
	for k := range kills {
		target := progress() + between
		e2e.WaitFor(t, ctx, "progress before a kill", func() bool { return progress() >= target })
		l := c.Leader(ctx)
		l.Kill()
		t.Logf("kill %d: SIGKILLed leader %s (commits acked %d+%d, queue records finished %d)", k+1, l.ID, logs[0].okCount(), logs[1].okCount(), q.finished())
		after := progress() + between/2
		e2e.WaitFor(t, ctx, "progress after a kill", func() bool { return progress() >= after })
		l.Launch(c.Nodes[(slices.Index(c.Nodes, l)+1)%3].Listen)
	}
	// Let the workers drain the queue; the committers stop with their
	// last commit acknowledged.
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	defer dcancel()
	var lastDescribe string
	defer func() {
		if t.Failed() {
			// What the workers saw and the group's last state, for a
			// queue that never drained.
			q.mu.Lock()
			t.Logf("ledger: %d of %d finished; %d claims (%d failed), %d acks (%d ok, %d unknown, %d stale), %d nacks (%d ok); last describe: %s",
				q.finishedLocked(), queueN, q.claims, q.claimErrs, q.ackCalls, q.ackOK, q.ackUnknown, q.staleAcks, q.nackCalls, q.nackOK, lastDescribe)
			q.mu.Unlock()
		}
	}()
	e2e.WaitFor(t, dctx, "queue drained", func() bool {
		if q.finished() == queueN {
			return true
		}
		// A permanent nack whose answer was lost finishes its record too.
		d, err := seed.DescribeQueueGroup(dctx, "q", "w")
		if err != nil {
			lastDescribe = err.Error()
			return false
		}
		lastDescribe = fmt.Sprintf("%+v", d.Partitions)
		for _, p := range d.Partitions {
			if p.DoneOffset != p.EndOffset || p.Ready+p.InFlight+p.Delayed+p.DeadPending != 0 {
				return false
			}
		}
		return true
	})
	close(stopWorkers)
	close(stopCommits)
	workWG.Wait()
	commitWG.Wait()
	c.Converge(ctx)
	sample(ctx, c, sampler, logs)
	close(stopSampler)
	sampleWG.Wait()

	// Offsets: every node ends at the last acknowledged commit.
	for _, cl := range logs {
		for _, v := range cl.violations {
			t.Error(v)
		}
		for _, nd := range c.Nodes {
			resp, err := nd.RPC.DescribeGroup(ctx, connect.NewRequest(&logdv1.DescribeGroupRequest{Group: cl.group}))
			if err != nil {
				t.Fatalf("%s: describe %s: %v", nd.ID, cl.group, err)
			}
			for _, p := range resp.Msg.Partitions {
				if want := cl.acked[p.Partition]; p.CommittedOffset != want {
					t.Errorf("%s: group %s partition %d committed %d, last acknowledged commit %d (highest sent %d)", nd.ID, cl.group, p.Partition, p.CommittedOffset, want, cl.attempted[p.Partition])
				}
			}
		}
		t.Logf("group %s: %d commit calls, %d acked, %d refused as not the leader, %d unknown, %d joins; final %v", cl.group, cl.calls, cl.oks, cl.notLeader, cl.unknowns, cl.rejoins, cl.acked)
	}
	for _, v := range sampler.violations {
		t.Error(v)
	}

	// Queue: acked once or dead-lettered once; never delivered after an
	// acknowledged ack; nothing lost.
	dead := map[string]int{}
	for i, nd := range c.Nodes {
		dt, err := nd.RPC.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "q.w.dlq"}))
		if err != nil {
			t.Fatalf("%s: describe the dead-letter topic: %v", nd.ID, err)
		}
		nodeDead := map[string]int{}
		got := nd.ReadAll(ctx, "q.w.dlq", int32(len(dt.Msg.Partitions)))
		for part, recs := range got {
			for _, r := range recs {
				d, ok := client.ParseDeadLetter(client.FetchedRecord{Topic: "q.w.dlq", Partition: part, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: fetchedHeaders(r)})
				if !ok {
					t.Errorf("%s: dead-letter record %d/%d without dead-letter headers", nd.ID, part, r.Offset)
					continue
				}
				nodeDead[fmt.Sprintf("%d/%d", d.OriginPartition, d.OriginOffset)]++
			}
		}
		if i == 0 {
			dead = nodeDead
		} else if fmt.Sprint(nodeDead) != fmt.Sprint(dead) {
			t.Errorf("%s holds different dead letters than %s", nd.ID, c.Nodes[0].ID)
		}
		d, err := nd.RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: "q", Group: "w"}))
		if err != nil {
			t.Fatalf("%s: describe queue group: %v", nd.ID, err)
		}
		var acked, deadLettered, open int64
		for _, p := range d.Msg.Partitions {
			acked += p.Acked
			deadLettered += p.DeadLettered
			open += p.Ready + p.InFlight + p.Delayed + p.DeadPending
		}
		if acked != int64(q.acked()) || deadLettered != int64(len(nodeDead)) || open != 0 {
			t.Errorf("%s: queue group reports %d acked, %d dead-lettered, %d open; the workers saw %d acks and the dead-letter topic holds %d",
				nd.ID, acked, deadLettered, open, q.acked(), len(nodeDead))
		}
	}
	redelivered := 0
	for key, r := range q.recs {
		n := dead[key]
		switch {
		case n > 1:
			t.Errorf("%s (%s) dead-lettered %d times", key, r.value, n)
		case len(r.ackedAt) > 1:
			t.Errorf("%s (%s) acked by %d deliveries %v", key, r.value, len(r.ackedAt), r.ackedAt)
		case len(r.ackedAt) == 1 && n == 1:
			t.Errorf("%s (%s) both acked and dead-lettered", key, r.value)
		case len(r.ackedAt) == 0 && n == 0:
			t.Errorf("lost: %s (%s) neither acked nor dead-lettered", key, r.value)
		case r.poison && n != 1:
			t.Errorf("%s (%s) was not dead-lettered", key, r.value)
		}
		if len(r.ackedAt) == 1 {
			for _, d := range r.deliveries {
				if d > r.ackedAt[0] {
					t.Errorf("%s (%s): delivery %d after delivery %d was acknowledged as acked", key, r.value, d, r.ackedAt[0])
				}
			}
		}
		if len(r.deliveries) > 1 {
			redelivered++
		}
	}
	for key := range dead {
		if q.recs[key] == nil {
			t.Errorf("dead letter of %s, never produced", key)
		}
	}
	t.Logf("queue: %d records (%d dead-lettered, %d delivered more than once); %d claims (%d failed), %d ack calls (%d acked, %d stale, %d unknown), %d nacks (%d ok); %d offset samples; %d kills",
		queueN, len(dead), redelivered, q.claims, q.claimErrs, q.ackCalls, q.ackOK, q.staleAcks, q.ackUnknown, q.nackCalls, q.nackOK, sampler.samples, kills)
}

// fetchedHeaders converts a raw record's headers.
func fetchedHeaders(r *logdv1.FetchedRecord) []client.Header {
	var out []client.Header
	for _, h := range r.Headers {
		out = append(out, client.Header{Key: h.Key, Value: h.Value})
	}
	return out
}
