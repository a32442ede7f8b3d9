package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/internal/histcheck"
)

// TestKafkaShareUnderFaults runs the queue checker of the nemesis tests
// (internal/histcheck CheckQueues) over share-group traffic (KIP-932)
// while the meta leader, which coordinates share groups, is SIGKILLed and
// restarted and is SIGSTOPped past an election and resumed. Three nodes;
// kgo share consumers (kgo.ShareGroup) and a worker of logd's queue API
// (the Go client) work one queue group: each record is ACCEPTed, one in
// ten REJECTed at every delivery, one in seven RELEASEd at its first;
// half the consumers now and then sit past their acquisition lock before
// they acknowledge, as does the worker past its lease. The history records
// every acquisition and acknowledgement with its outcome, the appends
// and, after healing, the queue group's final state and the topic on
// every node; every checker must find nothing, and each record must end
// acked once by one member, or dead-lettered once.
//
// What a Kafka client can tell the checker, and so what it judges for
// share traffic (docs/faults.md, T5):
//
//   - A share acquisition has no delivery token. Each is recorded under a
//     token of its own (consumer, poll, delivery count), and an
//     acknowledgement names the token of the record it acknowledges. The
//     protocol names offsets only: were the same member to acquire the
//     offset again before its acknowledgement of the earlier delivery
//     returned, the server would apply it to the later one, so such an
//     acknowledgement is recorded as unknown.
//   - kgo fetches in the background; with MaxConcurrentFetches(0) it
//     sends a ShareFetch only while the application polls, one at a time,
//     so the fetch behind a poll's records began after the previous poll
//     that returned records began: that is the acquisition's call, and
//     the poll's return its return.
//   - The lock deadline is the later of the poll's return plus the lock
//     configured and the deadline kgo derives from the answer (its
//     decoding time plus the lock the server said): neither is before the
//     server's. The test fails if the server's lock exceeds the one set.
//   - The server releases a member's records unasked (its connection
//     closes, it joins a new leader, its session times out), so a share
//     acquisition is histcheck.Delivery.Revocable: certainly held only up
//     to its last successful acknowledgement, and two live leases are
//     judged only against that.
//   - kgo reports acknowledgement results per partition and request. The
//     consumer acknowledges a poll's records, then FlushAcks, which
//     returns once every result is in; an acknowledgement is ok when every
//     result for its partition since the last flush is, and unknown
//     otherwise (a partition's error may cover records that applied).
//     Refused stale acknowledgements are therefore never counted as
//     refused: the checker judges only that none is counted as a success.
//   - Records the server handed out in an answer the client never read
//     (a fetch cut off by a fault) are not in the history; they only
//     raise later delivery counts.
//
// Each run also checks its checker: the same history, with one released
// record's first delivery then accepted after the record was handed out
// again, must fail. The default run has 300 records of 3 partitions,
// three consumers, one kill and one pause; LOGD_FAULT_LONG=1 (make fault)
// 20,000 of 6, four consumers, three kills and three pauses that last
// 5 s past the election, with half the records produced under the
// faults.
func TestKafkaShareUnderFaults(t *testing.T) {
	e2e.ParallelShort(t)
	cfg := shareFaultConfig{records: 300, partitions: 3, consumers: 3, maxRecords: 8, faults: []string{"kill", "pause"}, stallEvery: 3}
	if e2e.FaultLong() {
		cfg = shareFaultConfig{records: 20_000, partitions: 6, consumers: 4, maxRecords: 50, late: 10_000,
			faults: []string{"kill", "pause", "kill", "pause", "kill", "pause"}, stallEvery: 5, pauseHold: 5 * time.Second}
	}
	runShareFaults(t, cfg)
}

// shareFaultConfig sizes a run of TestKafkaShareUnderFaults.
type shareFaultConfig struct {
	records    int
	partitions int32
	consumers  int
	maxRecords int32 // ShareMaxRecords
	// late records are produced while the faults run, the others before.
	late int
	// faults are struck in turn as the records finish: "kill" or "pause".
	faults []string
	// stallEvery: the odd-numbered consumers and the worker sit past
	// their lock before acknowledging every stallEvery-th batch, from the
	// second.
	stallEvery int
	// pauseHold: a paused leader stays stopped this long after another
	// node leads, past locks it handed out; 0: resumed once another node
	// leads. (kgo's share consumers make no progress meanwhile: kgo keeps
	// heartbeating the stopped coordinator, as it looks a coordinator up
	// again only on a coordinator error code, and does not rejoin on the
	// new leader's UNKNOWN_MEMBER_ID to its ShareFetch.)
	pauseHold time.Duration
}

// The run's names and settings.
const (
	sfTopic = "share-faults"
	sfGroup = "sf"
	// sfLock is the acquisition lock (share.record.lock.duration.ms) and
	// the queue group's lease: shorter than a stall.
	sfLock = time.Second
	// sfWork bounds the time a member spends on a batch before it
	// acknowledges: records handed out again stay held a while, so that
	// a late acknowledgement may meet them held by another member.
	sfWork = 200 * time.Millisecond
	// sfLimit is share.delivery.count.limit: far above what the run's
	// releases and faults add, so that only REJECT dead-letters.
	sfLimit = 20
)

// sfValue is the value of record i.
func sfValue(i int) string { return fmt.Sprintf("sf-%06d", i) }

// sfIndex is the i of a value sfValue made (-1 otherwise).
func sfIndex(v []byte) int {
	i, err := strconv.Atoi(strings.TrimPrefix(string(v), "sf-"))
	if err != nil || !strings.HasPrefix(string(v), "sf-") {
		return -1
	}
	return i
}

// sfAction is what every member does with record i at delivery dc: one
// in ten is rejected at every delivery, one in seven released at its
// first, the rest accepted.
func sfAction(i int, dc int) kgo.AckStatus {
	switch {
	case i%10 == 3:
		return kgo.AckReject
	case i%7 == 2 && dc == 1:
		return kgo.AckRelease
	}
	return kgo.AckAccept
}

// shareFaults is one run.
type shareFaults struct {
	t      *testing.T
	cfg    shareFaultConfig
	c      *e2e.Cluster
	kaddrs map[string]string // node id -> Kafka address
	seeds  []string
	rec    *histcheck.Recorder
	stop   chan struct{}
	wg     sync.WaitGroup

	// finishing counts the acknowledgements made that finish a record
	// (ACCEPT, REJECT, ack, permanent nack), whatever their outcome:
	// the faults' trigger, which grows as long as records are worked.
	finishing atomic.Int64
	// shareClients are the history's client ids of the kgo consumers.
	shareClients map[int]bool
	// stalls counts the batches a consumer or the worker sat on past
	// their lock.
	stalls atomic.Int64

	mu sync.Mutex
	// longLocks names acquisitions whose lock, as the server said, ends
	// after the poll's return plus sfLock; guarded by mu.
	longLocks []string
}

func runShareFaults(t *testing.T, cfg shareFaultConfig) {
	started := time.Now()
	timeout := 2 * time.Minute
	if e2e.FaultLong() {
		timeout = 20 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := &shareFaults{t: t, cfg: cfg, c: &e2e.Cluster{T: t}, kaddrs: map[string]string{}, rec: histcheck.NewRecorder(),
		stop: make(chan struct{}), shareClients: map[int]bool{}}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		r.kaddrs[id] = e2e.FreeAddr(t)
		r.seeds = append(r.seeds, r.kaddrs[id])
		// Members heartbeat often, so that they find a new coordinator
		// soon; the session timeout is longer than a pause.
		r.c.Nodes = append(r.c.Nodes, e2e.NewNode(t, id, "--kafka-listen", r.kaddrs[id],
			"--kafka-share-session-timeout", "10s", "--kafka-share-heartbeat-interval", "500ms"))
	}
	r.c.Start()
	leader := r.c.Leader(ctx)
	e2e.CreateTopic(t, ctx, leader, sfTopic, cfg.partitions, nil)
	// The group's settings are the coordinator's, the meta leader's.
	admin, err := kgo.NewClient(kgo.SeedBrokers(r.kaddrs[leader.ID]))
	if err != nil {
		t.Fatal(err)
	}
	setGroupConfigs(t, ctx, admin, sfGroup, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.record.lock.duration.ms": strconv.FormatInt(sfLock.Milliseconds(), 10),
		"share.delivery.count.limit":    strconv.Itoa(sfLimit),
	})
	admin.Close()

	producer, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...), kgo.DefaultProduceTopic(sfTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(250*time.Millisecond), kgo.RetryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	early := cfg.records - cfg.late
	r.produce(ctx, producer, 0, early)
	setup := time.Since(started)

	// Client 0 is the producer; 1..consumers the kgo consumers; then the
	// worker.
	for i := 1; i <= cfg.consumers; i++ {
		r.shareClients[i] = true
		r.goRun(func() { r.consume(ctx, i, i%2 == 1) })
	}
	r.goRun(func() { r.work(ctx, cfg.consumers+1) })
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		r.produce(ctx, producer, early, cfg.records)
	}()
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(r.stop)
			r.wg.Wait()
		}
	}
	defer func() {
		<-produced
		halt()
	}()

	faultsAt := time.Now()
	var struck []string
	for k, kind := range cfg.faults {
		at := int64(cfg.records * (k + 1) / (len(cfg.faults) + 1))
		e2e.WaitFor(t, ctx, fmt.Sprintf("%d finishing acknowledgements before fault %d (%s)", at, k+1, kind), func() bool {
			return r.finishing.Load() >= at
		})
		struck = append(struck, r.fault(ctx, kind))
	}
	<-produced
	faultTime := time.Since(faultsAt)
	drainAt := time.Now()
	r.waitDrained(ctx)
	halt()
	r.c.Converge(ctx)
	drainTime := time.Since(drainAt)

	for _, nd := range r.c.Nodes {
		recordQueueFinal(ctx, t, r.rec, nd, sfTopic, sfGroup)
	}
	r.scan(ctx)
	ops := disambiguateShareAcks(r.rec.Ops(), r.shareClients)
	opt := histcheck.Options{ClockSlack: int64(100 * time.Millisecond)}
	verdicts := histcheck.CheckAll(ops, opt)
	for _, v := range verdicts {
		if v.OK() {
			t.Logf("verdict %v", &v)
		} else {
			t.Errorf("verdict %v", &v)
		}
	}
	r.checkOutcomes(ops)
	r.checkControl(ops, opt)
	r.mu.Lock()
	if len(r.longLocks) > 0 {
		t.Errorf("%d acquisitions locked for longer than share.record.lock.duration.ms (%v), e.g. %s", len(r.longLocks), sfLock, r.longLocks[0])
	}
	r.mu.Unlock()
	if t.Failed() || os.Getenv("LOGD_NEMESIS_SAVE") == "1" {
		r.save(ops, verdicts)
	}

	var acks, unknown, stale int
	for _, op := range ops {
		if op.Kind != histcheck.Ack && op.Kind != histcheck.Nack {
			continue
		}
		acks++
		switch op.Outcome {
		case histcheck.Unknown, histcheck.Pending:
			unknown++
		case histcheck.Failed:
			stale++
		}
	}
	q, err := leaderQueue(ctx, r.c, sfTopic, sfGroup)
	if err != nil {
		t.Fatal(err)
	}
	var nacked, expired int64
	for _, p := range q.Partitions {
		nacked, expired = nacked+p.Nacked, expired+p.Expired
	}
	t.Logf("%d records of %d partitions; faults %s; %d acknowledgements (%d unknown, %d refused), %d batches sat on past the lock, %d nacks and releases, %d locks expired; %d calls recorded; setup %v, faults %v, drain %v, took %v",
		cfg.records, cfg.partitions, strings.Join(struck, ", "), acks, unknown, stale, r.stalls.Load(), nacked, expired, len(ops),
		setup.Round(time.Millisecond), faultTime.Round(time.Millisecond), drainTime.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}

// save writes the run's history (history.jsonl, which internal/histcheck's
// TestRecheck re-checks offline), its verdicts and the nodes' logs under
// nemesisOut, as a failing nemesis run does.
func (r *shareFaults) save(ops []histcheck.Op, verdicts []histcheck.Verdict) {
	t := r.t
	dir := filepath.Join(nemesisOut(), fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = histcheck.SaveFile(filepath.Join(dir, "history.jsonl"), ops)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "verdicts.txt"), []byte(histcheck.Report(verdicts)+"\n"), 0o644)
	}
	for _, nd := range r.c.Nodes {
		if err != nil {
			break
		}
		var b []byte
		if b, err = os.ReadFile(nd.Logs.Name()); err == nil {
			err = os.WriteFile(filepath.Join(dir, nd.ID+".log"), b, 0o644)
		}
	}
	if err != nil {
		t.Errorf("save the run: %v", err)
		return
	}
	t.Logf("saved the history, verdicts and node logs in %s (re-check: go test ./internal/histcheck -run TestRecheck -args -history %s)",
		dir, filepath.Join(dir, "history.jsonl"))
}

// goRun runs f on a goroutine the run waits for.
func (r *shareFaults) goRun(f func()) {
	r.wg.Add(1)
	go func() { defer r.wg.Done(); f() }()
}

// stopped reports whether the workload is to stop, after waiting d.
func (r *shareFaults) stopped(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-r.stop:
			return true
		default:
			return false
		}
	}
	select {
	case <-r.stop:
		return true
	case <-time.After(d):
		return false
	}
}

// produce appends records from..to-1, record i to partition i mod the
// partitions, in chunks, each record an append of client 0 in the
// history (a kgo error is an unknown outcome: kgo retried it).
func (r *shareFaults) produce(ctx context.Context, cl *kgo.Client, from, to int) {
	const chunk = 100
	for i := from; i < to && ctx.Err() == nil; i += chunk {
		var recs []*kgo.Record
		var calls []*histcheck.Call
		for j := i; j < min(i+chunk, to); j++ {
			p := int32(j % int(r.cfg.partitions))
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte(sfValue(j))})
			calls = append(calls, r.rec.Begin(histcheck.Op{Kind: histcheck.Append, Client: 0, Leader: true, Topic: sfTopic, Partition: p, Value: sfValue(j)}))
		}
		for k, res := range produceSync(ctx, cl, recs) {
			if res.Err != nil {
				calls[k].Unknown(res.Err)
				continue
			}
			off := res.Record.Offset
			calls[k].OK(func(op *histcheck.Op) { op.Offset = off })
		}
	}
}

// produceSync produces recs and returns their results in their order
// (kgo's are in the order they completed).
func produceSync(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) kgo.ProduceResults {
	byRec := map[*kgo.Record]kgo.ProduceResult{}
	for _, x := range cl.ProduceSync(ctx, recs...) {
		byRec[x.Record] = x
	}
	out := make(kgo.ProduceResults, len(recs))
	for i, rec := range recs {
		out[i] = byRec[rec]
		if out[i].Record == nil {
			out[i] = kgo.ProduceResult{Record: rec, Err: errors.New("kgo gave no result")}
		}
	}
	return out
}

// shareConsumer is one kgo share consumer of a run, with the
// acknowledgement results kgo reported since its last flush.
type shareConsumer struct {
	mu      sync.Mutex
	results []kgo.ShareAckResult // guarded by mu
}

func (c *shareConsumer) note(rs kgo.ShareAckResults) {
	c.mu.Lock()
	c.results = append(c.results, rs...)
	c.mu.Unlock()
}

func (c *shareConsumer) take() []kgo.ShareAckResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.results
	c.results = nil
	return out
}

// consume runs kgo share consumer id until the run stops: it polls,
// records the acquisition, acknowledges each record as sfAction says
// (after sitting past the lock, now and then, if stall), flushes, and
// records each acknowledgement with the outcome kgo reported.
func (r *shareFaults) consume(ctx context.Context, id int, stall bool) {
	t := r.t
	c := &shareConsumer{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...), kgo.ShareGroup(sfGroup), kgo.ConsumeTopics(sfTopic),
		kgo.MaxConcurrentFetches(0), kgo.ShareMaxRecords(r.cfg.maxRecords), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) { c.note(rs) }))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	// No fetch of the client's began before it existed.
	lower := r.rec.Now()
	batches := 0
	for !r.stopped(0) {
		call := r.rec.Now()
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		ret, retWall := r.rec.Now(), time.Now()
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		batches++
		claim := histcheck.Op{Kind: histcheck.Claim, Client: id, Group: sfGroup, Topic: sfTopic, Call: lower, Return: ret, Outcome: histcheck.OK}
		tokens := make([]string, len(recs))
		for i, rec := range recs {
			tokens[i] = fmt.Sprintf("m%d.b%d.d%d", id, batches, rec.DeliveryCount())
			deadline := max(ret+int64(sfLock), r.rec.At(rec.AcquisitionDeadline()))
			if rec.AcquisitionDeadline().After(retWall.Add(sfLock + time.Millisecond)) {
				r.mu.Lock()
				r.longLocks = append(r.longLocks, fmt.Sprintf("%s/%d@%d delivery %d to consumer %d: lock until %v, %v after the poll returned",
					rec.Topic, rec.Partition, rec.Offset, rec.DeliveryCount(), id, rec.AcquisitionDeadline().Format(time.RFC3339Nano), rec.AcquisitionDeadline().Sub(retWall)))
				r.mu.Unlock()
			}
			claim.Deliveries = append(claim.Deliveries, histcheck.Delivery{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
				Token: tokens[i], Count: int(rec.DeliveryCount()), Deadline: deadline, Revocable: true})
		}
		r.rec.Add(claim)
		// The fetch behind the next records began after this poll did.
		lower = call
		if r.stopped(r.think(stall, batches)) {
			return
		}
		acks := make([]histcheck.Op, len(recs))
		for i, rec := range recs {
			st := sfAction(sfIndex(rec.Value), int(rec.DeliveryCount()))
			op := histcheck.Op{Kind: histcheck.Ack, Client: id, Group: sfGroup, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Token: tokens[i]}
			if st != kgo.AckAccept {
				op.Kind, op.Permanent = histcheck.Nack, st == kgo.AckReject
			}
			op.Call = r.rec.Now()
			rec.Ack(st)
			acks[i] = op
		}
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ferr := cl.FlushAcks(fctx)
		cancel()
		fret := r.rec.Now()
		byPart := map[string][]error{}
		for _, res := range c.take() {
			k := fmt.Sprintf("%s/%d", res.Topic, res.Partition)
			byPart[k] = append(byPart[k], res.Err)
		}
		for _, op := range acks {
			op.Return = fret
			errs := byPart[fmt.Sprintf("%s/%d", op.Topic, op.Partition)]
			switch bad := slices.IndexFunc(errs, func(e error) bool { return e != nil }); {
			case ferr != nil:
				op.Outcome, op.Err = histcheck.Unknown, "flush: "+ferr.Error()
			case len(errs) == 0:
				op.Outcome, op.Err = histcheck.Unknown, "no acknowledgement result for the partition"
			case bad >= 0:
				op.Outcome, op.Err = histcheck.Unknown, errs[bad].Error()
			default:
				op.Outcome = histcheck.OK
			}
			if op.Kind == histcheck.Ack || op.Permanent {
				r.finishing.Add(1)
			}
			r.rec.Add(op)
		}
	}
}

// think is how long a client works on its n-th batch before it
// acknowledges: up to sfWork or, for a client that stalls, on every
// stallEvery-th batch, during the faults and after, past the lock by
// half of it to all of it, so that its late acknowledgements reach
// records whose lock expired, records handed to another member and
// records another member finished.
func (r *shareFaults) think(stall bool, n int) time.Duration {
	if stall && (n+r.cfg.stallEvery-2)%r.cfg.stallEvery == 0 {
		r.stalls.Add(1)
		return sfLock + sfLock/2 + rand.N(sfLock/2)
	}
	return rand.N(sfWork)
}

// work runs a worker of logd's queue API (the Go client) on the share
// group's queue group until the run stops, as the nemesis workload's
// queue workers do: it claims, acknowledges each record as sfAction says
// (a release is a nack without delay), sitting past the lease now and
// then.
func (r *shareFaults) work(ctx context.Context, id int) {
	cl, err := client.New(r.c.Nodes[id%len(r.c.Nodes)].Listen, client.Options{Timeout: 2 * time.Second})
	if err != nil {
		r.t.Error(err)
		return
	}
	defer cl.Close()
	zero := time.Duration(0)
	batches := 0
	// It claims a few records at a time, now and then: most go to the
	// share consumers, whose deliveries the coordinator tracks.
	for !r.stopped(50 * time.Millisecond) {
		c := r.rec.Begin(histcheck.Op{Kind: histcheck.Claim, Client: id, Group: sfGroup, Topic: sfTopic})
		res, err := cl.Claim(ctx, client.ClaimRequest{Topic: sfTopic, Group: sfGroup, MaxRecords: 2, MaxWait: 200 * time.Millisecond, Worker: "sf-worker"})
		end(c, err, func(op *histcheck.Op) {
			for _, j := range res.Jobs {
				op.Deliveries = append(op.Deliveries, histcheck.Delivery{Topic: j.Topic, Partition: j.Partition, Offset: j.Offset,
					Token: j.Token, Count: j.Delivery, Deadline: r.rec.At(j.LeaseDeadline)})
			}
		})
		if err != nil || len(res.Jobs) == 0 {
			continue
		}
		batches++
		if r.stopped(r.think(true, batches)) {
			return
		}
		for _, j := range res.Jobs {
			op := histcheck.Op{Client: id, Group: sfGroup, Topic: sfTopic, Partition: j.Partition, Offset: j.Offset, Token: j.Token}
			var err error
			switch sfAction(sfIndex(j.Value), j.Delivery) {
			case kgo.AckAccept:
				op.Kind = histcheck.Ack
				c := r.rec.Begin(op)
				var rs []client.TokenResult
				rs, err = cl.Ack(ctx, sfTopic, sfGroup, j.Token)
				end(c, tokenErr(err), func(op *histcheck.Op) {
					if len(rs) > 0 {
						op.Duplicate = rs[0].Duplicate
					}
				})
			case kgo.AckReject:
				op.Kind, op.Permanent = histcheck.Nack, true
				c := r.rec.Begin(op)
				_, err = cl.Nack(ctx, sfTopic, sfGroup, client.Nack{Token: j.Token, Permanent: true, Error: "rejected"})
				end(c, tokenErr(err), nil)
			default:
				op.Kind = histcheck.Nack
				c := r.rec.Begin(op)
				_, err = cl.Nack(ctx, sfTopic, sfGroup, client.Nack{Token: j.Token, Error: "released", Delay: &zero})
				end(c, tokenErr(err), nil)
			}
			if op.Kind == histcheck.Ack || op.Permanent {
				r.finishing.Add(1)
			}
		}
	}
}

// fault strikes one fault at the meta leader and returns what it did:
// kill (SIGKILL; restarted once another node leads, and ready before the
// next fault) or pause (SIGSTOP until another node leads, and pauseHold
// more; then SIGCONT).
func (r *shareFaults) fault(ctx context.Context, kind string) string {
	t := r.t
	leader := r.c.Leader(ctx)
	began := time.Now()
	switch kind {
	case "kill":
		leader.Kill()
		r.waitOtherLeader(ctx, leader)
		leader.Launch("")
		e2e.WaitFor(t, ctx, leader.ID+" ready after its restart", func() bool {
			st, err := leader.Status(ctx)
			return err == nil && st.Ready
		})
	case "pause":
		leader.Signal(syscall.SIGSTOP)
		r.waitOtherLeader(ctx, leader)
		select {
		case <-time.After(r.cfg.pauseHold):
		case <-ctx.Done():
		}
		leader.Signal(syscall.SIGCONT)
	default:
		t.Fatalf("unknown fault %q", kind)
	}
	return fmt.Sprintf("%s %s (%v)", kind, leader.ID, time.Since(began).Round(time.Millisecond))
}

// waitOtherLeader waits until a node other than old leads, asking only
// the others (a stopped node would not answer).
func (r *shareFaults) waitOtherLeader(ctx context.Context, old *e2e.Node) {
	e2e.WaitFor(r.t, ctx, "a leader other than "+old.ID, func() bool {
		for _, nd := range r.c.Nodes {
			if nd == old || nd.Cmd == nil {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := nd.Status(sctx)
			cancel()
			if err == nil && st.State == "Leader" && st.Ready {
				return true
			}
		}
		return false
	})
}

// leaderQueue describes the queue group at the leader.
func leaderQueue(ctx context.Context, c *e2e.Cluster, topic, group string) (*logdv1.DescribeQueueGroupResponse, error) {
	nd := c.Leader(ctx)
	q, err := nd.RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: topic, Group: group}))
	if err != nil {
		return nil, err
	}
	return q.Msg, nil
}

// waitDrained waits until every record is produced and finished (acked
// or dead-lettered), the workload still running.
func (r *shareFaults) waitDrained(ctx context.Context) {
	var last *logdv1.DescribeQueueGroupResponse
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for dctx.Err() == nil {
		q, err := leaderQueue(dctx, r.c, sfTopic, sfGroup)
		if err == nil {
			last = q
			var end int64
			done := true
			for _, p := range q.Partitions {
				end += p.EndOffset
				if p.DoneOffset != p.EndOffset || p.Ready+p.InFlight+p.Delayed+p.DeadPending != 0 {
					done = false
				}
			}
			if done && end == int64(r.cfg.records) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("the queue group did not drain within a minute after the faults: %v", last)
}

// scan records every node's copy of the topic.
func (r *shareFaults) scan(ctx context.Context) {
	for _, nd := range r.c.Nodes {
		start := r.rec.Now()
		got := nd.ReadAll(ctx, sfTopic, r.cfg.partitions)
		ret := r.rec.Now()
		for p := range r.cfg.partitions {
			op := histcheck.Op{Kind: histcheck.Scan, Client: -1, Node: nd.ID, Call: start, Return: ret, Outcome: histcheck.OK, Topic: sfTopic, Partition: p}
			for _, rec := range got[p] {
				op.Records = append(op.Records, histcheck.Record{Offset: rec.Offset, Value: string(rec.Value)})
			}
			r.rec.Add(op)
		}
	}
}

// disambiguateShareAcks returns ops with each ok acknowledgement of a
// share consumer (clients) made unknown when the same consumer acquired
// the record again, in a later delivery, before the acknowledgement
// returned: Kafka's acknowledgements name offsets, so the server may have
// applied it to that later delivery.
func disambiguateShareAcks(ops []histcheck.Op, clients map[int]bool) []histcheck.Op {
	type rk struct {
		client    int
		topic     string
		partition int32
		offset    int64
	}
	type acq struct {
		token       string
		count       int
		call        int64
		claimReturn int64
	}
	byRec := map[rk][]acq{}
	for _, op := range ops {
		if op.Kind != histcheck.Claim || op.Outcome != histcheck.OK || !clients[op.Client] {
			continue
		}
		for _, d := range op.Deliveries {
			k := rk{op.Client, d.Topic, d.Partition, d.Offset}
			byRec[k] = append(byRec[k], acq{token: d.Token, count: d.Count, call: op.Call, claimReturn: op.Return})
		}
	}
	out := slices.Clone(ops)
	for i := range out {
		op := &out[i]
		if (op.Kind != histcheck.Ack && op.Kind != histcheck.Nack) || op.Outcome != histcheck.OK || !clients[op.Client] {
			continue
		}
		as := byRec[rk{op.Client, op.Topic, op.Partition, op.Offset}]
		j := slices.IndexFunc(as, func(a acq) bool { return a.token == op.Token })
		if j < 0 {
			continue
		}
		if slices.ContainsFunc(as, func(a acq) bool { return a.token != op.Token && a.count > as[j].count && a.call < op.Return }) {
			op.Outcome = histcheck.Unknown
			op.Err = "the consumer acquired the offset again before this acknowledgement returned"
		}
	}
	return out
}

// checkOutcomes requires what the run's actions imply of each record:
// every one finished once on every node, acked by one member at most, a
// rejected record dead-lettered and every other one acked.
func (r *shareFaults) checkOutcomes(ops []histcheck.Op) {
	t := r.t
	type key struct {
		partition int32
		offset    int64
	}
	value := map[key]string{}
	finals := map[key][]histcheck.State{}
	ackers := map[key]map[int]bool{}
	for _, op := range ops {
		k := key{op.Partition, op.Offset}
		switch {
		case op.Kind == histcheck.Append && op.Outcome == histcheck.OK:
			value[k] = op.Value
		case op.Kind == histcheck.QueueFinal:
			finals[k] = append(finals[k], op.State)
		case op.Kind == histcheck.Ack && op.Outcome == histcheck.OK:
			if ackers[k] == nil {
				ackers[k] = map[int]bool{}
			}
			ackers[k][op.Client] = true
		}
	}
	if len(value) != r.cfg.records {
		t.Errorf("%d of %d appends acknowledged", len(value), r.cfg.records)
	}
	bad, twice := 0, 0
	for _, k := range slices.SortedFunc(maps.Keys(value), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
	}) {
		want := histcheck.Acked
		if sfIndex([]byte(value[k]))%10 == 3 {
			want = histcheck.DeadLettered
		}
		fs := finals[k]
		wrong := len(fs) != len(r.c.Nodes) || slices.ContainsFunc(fs, func(s histcheck.State) bool { return s != want })
		if len(ackers[k]) > 1 {
			if twice++; twice <= 20 {
				t.Errorf("%s/%d@%d (%s) acked by %d members: %v", sfTopic, k.partition, k.offset, value[k], len(ackers[k]), slices.Sorted(maps.Keys(ackers[k])))
			}
		}
		if wrong {
			if bad++; bad <= 20 {
				t.Errorf("%s/%d@%d (%s): final states %v on %d nodes, want %s on each", sfTopic, k.partition, k.offset, value[k], fs, len(r.c.Nodes), want)
			}
		}
	}
	if twice > 20 {
		t.Errorf("... and %d more records acked by two members", twice-20)
	}
	if bad > 20 {
		t.Errorf("... and %d more records with wrong final states", bad-20)
	}
}

// checkControl shows the queue checker fails on this run's history once
// a stale acknowledgement is made to succeed: the first released record's
// released delivery is accepted after the record was handed out again.
func (r *shareFaults) checkControl(ops []histcheck.Op, opt histcheck.Options) {
	t := r.t
	claims := map[string]histcheck.Op{} // token -> claim
	for _, op := range ops {
		if op.Kind == histcheck.Claim && op.Outcome == histcheck.OK {
			for _, d := range op.Deliveries {
				claims[fmt.Sprintf("%d/%d/%s", d.Partition, d.Offset, d.Token)] = op
			}
		}
	}
	for _, rel := range ops {
		if rel.Kind != histcheck.Nack || rel.Permanent || rel.Outcome != histcheck.OK || !r.shareClients[rel.Client] {
			continue
		}
		// A later delivery of the record.
		var later *histcheck.Op
		for _, op := range ops {
			if op.Kind != histcheck.Claim || op.Outcome != histcheck.OK || op.Call <= rel.Return {
				continue
			}
			if slices.ContainsFunc(op.Deliveries, func(d histcheck.Delivery) bool {
				return d.Partition == rel.Partition && d.Offset == rel.Offset
			}) {
				later = &op
				break
			}
		}
		if later == nil {
			continue
		}
		bad := rel
		bad.ID = len(ops)
		bad.Kind, bad.Call, bad.Return, bad.Err = histcheck.Ack, later.Return+1, later.Return+2, ""
		all := opt
		all.MaxViolations = len(ops) + 1
		v := histcheck.CheckQueues(append(slices.Clone(ops), bad), all)
		name := fmt.Sprintf("#%d ", bad.ID)
		if i := slices.IndexFunc(v.Violations, func(s string) bool { return strings.Contains(s, name) }); i >= 0 {
			t.Logf("control: with %v added the queue checker fails: %s", &bad, v.Violations[i])
		} else {
			t.Errorf("the queue checker did not name %v, an accept of a released delivery after %v (%d violations)", &bad, later, len(v.Violations))
		}
		return
	}
	t.Errorf("no share consumer's release was followed by another delivery of its record: nothing to check the checker with")
}
