package replication

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/replication/fsm"
)

// maxDedupRounds bounds how often a produce call re-checks its keys after
// a concurrent call committed one of them first.
const maxDedupRounds = 8

// Produce validates every record, answers records whose idempotency key is
// already in the topic's window, routes the rest to partitions (explicit,
// else murmur2 of the key, else round-robin), builds one record batch per
// partition and appends them all in one Raft entry. It answers only after
// that entry is committed and applied; an invalid record refuses the whole
// call and nothing is written.
//
// With a Producer, each partition's batch carries the producer's id,
// epoch and the partition's sequence and is judged at apply by the
// partition's producer state (replication/fsm, producers.go), the Kafka
// producers' rules and state: a duplicate is answered with its original
// offsets, marked Duplicate; a refused batch fails the call with its
// error (backend.ErrOutOfOrderSequence, backend.ErrInvalidProducerEpoch)
// while the call's other partitions are written.
//
// Errors: ErrInvalidTopicName, backend.ErrUnknownTopic, backend.ErrUnknownPartition,
// backend.ErrRecordTooLarge, backend.ErrInvalidArgument (a bad record), backend.ErrKeyRequired (a
// record without a key on a compacted topic),
// ErrIdempotencyConflict, *backend.OverloadedError (admission control), backend.ErrDedupRace
// (concurrent calls kept racing for the same keys), the producer's refusals
// above and *backend.FeatureLevelError (a member's build does not judge
// producers' batches), and the proposal errors
// (backend.ErrNotLeader, backend.ErrTimeout, backend.ErrStopped, backend.ErrShutdown).
func (b *Backend) Produce(ctx context.Context, req backend.ProduceRequest) (backend.ProduceResult, error) {
	return b.prod.Produce(ctx, req)
}

// producer is a node's produce path: routing, batch building and the
// rounds of idempotency keys, over the node's proposals, with round-robin
// counters of its own. A Backend has one, and so have the node's leader
// jobs (jobs.go), which produce without a Backend.
type producer struct {
	n *Node
	// rr holds the round-robin counters of keyless records.
	rr roundRobin
}

// Produce is Backend.Produce on p's node and counters.
func (p *producer) Produce(ctx context.Context, req backend.ProduceRequest) (backend.ProduceResult, error) {
	res, err := p.produce(ctx, req)
	return res, fromStorage(err)
}

func (p *producer) produce(ctx context.Context, req backend.ProduceRequest) (backend.ProduceResult, error) {
	if err := partition.ValidateTopicName(req.Topic); err != nil {
		return backend.ProduceResult{}, err
	}
	if req.Producer != nil {
		if err := p.checkProducer(req); err != nil {
			return backend.ProduceResult{}, err
		}
	}
	t, err := p.n.FSM().Topic(req.Topic)
	if err != nil {
		return backend.ProduceResult{}, err
	}
	if t.Placement != nil {
		res, err := p.produceSpread(ctx, t, req)
		if err == nil {
			res.Incarnation = t.CreateIndex
			p.raiseFloors(t, res.Results)
		}
		return res, err
	}
	return p.produceOn(ctx, p.n.metaGroup(), t, req, nil)
}

// raiseFloors raises this node's read floor of each partition of the
// placed topic t that results wrote to (read_floor.go), once per
// partition: each raise takes the floors' lock.
func (p *producer) raiseFloors(t *fsm.Topic, results []backend.RecordResult) {
	ends := make([]int64, len(t.Placement))
	for _, r := range results {
		if r.Partition >= 0 && int(r.Partition) < len(ends) {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
	}
	for part, end := range ends {
		if end > 0 {
			p.n.floors.raise(t.Name, int32(part), t.CreateIndex, end)
		}
	}
}

// checkProducer checks a call's producer identity before anything is
// routed: the cluster judges producers' batches, the identity is whole,
// and every record's partition is known before routing (a partition or a
// key: a keyless record's round-robin partition could not have been
// given its sequence) and carries no idempotency key (a key answered as a
// duplicate would take its record out of the batch, and its sequence
// with it).
func (p *producer) checkProducer(req backend.ProduceRequest) error {
	if err := p.n.CheckIdempotence(); err != nil {
		return err
	}
	pr := req.Producer
	if pr.ID < 0 || pr.Epoch < 0 || len(pr.BaseSequences) == 0 {
		return fmt.Errorf("%w: producer %d with epoch %d and %d sequences", backend.ErrInvalidArgument, pr.ID, pr.Epoch, len(pr.BaseSequences))
	}
	for part, seq := range pr.BaseSequences {
		if seq < 0 {
			return fmt.Errorf("%w: producer %d: sequence %d for partition %d", backend.ErrInvalidArgument, pr.ID, seq, part)
		}
	}
	for i := range req.Records {
		r := &req.Records[i]
		switch {
		case r.IdempotencyKey != "":
			return fmt.Errorf("%w: record %d: an idempotency key in a call with a producer", backend.ErrInvalidArgument, i)
		case !r.HasPartition && r.Key == nil:
			return fmt.Errorf("%w: record %d: neither a partition nor a key in a call with a producer", backend.ErrInvalidArgument, i)
		}
	}
	return nil
}

// produceOn answers req on group g, which holds every partition the
// records name (the meta group for a topic without a placement), whose
// state machine holds t. partitions, when not nil, are the records'
// partitions (produceSpread's), which the records then do not carry.
func (p *producer) produceOn(ctx context.Context, g groupHandle, t *fsm.Topic, req backend.ProduceRequest, partitions []int32) (backend.ProduceResult, error) {
	call := &produceCall{topic: t, records: req.Records, partitions: partitions, g: g, producer: req.Producer}
	call.res.Results = make([]backend.RecordResult, len(req.Records))
	for i := range call.res.Results {
		call.res.Results[i].Offset = -1 // not answered yet
	}
	defer call.release()
	if err := call.digestKeys(); err != nil {
		return backend.ProduceResult{}, err
	}
	for round := 0; ; round++ {
		err := p.produceRound(ctx, call, round > 0)
		if !errors.Is(err, backend.ErrDedupRace) {
			if err != nil {
				return backend.ProduceResult{}, err
			}
			break
		}
		if round+1 == maxDedupRounds {
			return backend.ProduceResult{}, fmt.Errorf("%w: %d rounds", err, maxDedupRounds)
		}
	}
	for i, j := range call.sameAs {
		if j >= 0 {
			orig := call.res.Results[j]
			call.res.Results[i] = backend.RecordResult{Partition: orig.Partition, Offset: orig.Offset, Duplicate: true}
		}
	}
	return call.res, nil
}

// partitionGroup collects the records of one produce call bound for one
// partition, with their positions in the request.
type partitionGroup struct {
	partition int32
	records   []batch.Record
	positions []int
	keys      []fsm.RecordKey
	// n and nkeys count the group's records and keyed records.
	n, nkeys int
}

// produceCall is one Produce request being answered.
type produceCall struct {
	// g is the group the call appends to, whose state machine holds
	// topic.
	g       groupHandle
	topic   *fsm.Topic
	records []backend.ProduceRecord
	// partitions, when not nil, is each record's partition, chosen by
	// the caller (produceSpread); the records' own are not read.
	partitions []int32
	// producer is the call's producer identity, nil without one.
	producer *backend.ProducerSequence
	// digests[i] is record i's payload digest if it has an idempotency
	// key; sameAs[i] is the position of an earlier record of the call with
	// the same key and payload, or -1. Both are nil in a call without keys.
	digests []dedup.Digest
	sameAs  []int
	// res is the answer being built; res.Results[i].Offset is -1 until
	// record i is answered.
	res backend.ProduceResult
	// scratch holds digests, sameAs and the call's key tables; nil in a
	// call without keys.
	scratch *keyedScratch
}

// keyedScratch is the memory a call with idempotency keys works in. It is
// pooled because every keyed record of every call passes here and its
// tables grow with the call's records (server's BenchmarkProduceIdempotencyKeys measures it).
type keyedScratch struct {
	digests  []dedup.Digest
	sameAs   []int
	slots    []int32
	keys     []fsm.RecordKey
	digester *dedup.Digester
}

var keyedScratchPool = sync.Pool{New: func() any { return new(keyedScratch) }}

// grow returns s's slice resized to n, reallocated only if too small.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// release returns the call's scratch to the pool. Nothing may use the
// call's digests, sameAs or record keys afterwards.
func (c *produceCall) release() {
	if c.scratch != nil {
		clear(c.scratch.keys) // drop the key strings
		keyedScratchPool.Put(c.scratch)
		c.scratch, c.digests, c.sameAs = nil, nil, nil
	}
}

// digestKeys computes the payload digest of every keyed record and pairs
// records of the call that repeat a key.
func (c *produceCall) digestKeys() error {
	var (
		dg    *dedup.Digester
		first keyPositions
	)
	for i := range c.records {
		r := &c.records[i]
		if r.IdempotencyKey == "" {
			continue
		}
		if c.scratch == nil { // the call's first key: calls without keys take no scratch
			c.scratch = keyedScratchPool.Get().(*keyedScratch)
			c.digests = grow(c.scratch.digests, len(c.records))
			c.sameAs = grow(c.scratch.sameAs, len(c.records))
			c.scratch.digests, c.scratch.sameAs = c.digests, c.sameAs
			clear(c.digests)
			for j := range c.sameAs {
				c.sameAs[j] = -1
			}
		}
		if len(r.IdempotencyKey) > dedup.MaxIdempotencyKeyBytes {
			return fmt.Errorf("%w: record %d: idempotency key of %d bytes; at most %d", backend.ErrInvalidArgument, i, len(r.IdempotencyKey), dedup.MaxIdempotencyKeyBytes)
		}
		if dg == nil {
			if c.scratch.digester == nil {
				c.scratch.digester = dedup.NewDigester()
			}
			dg = c.scratch.digester
			first = newKeyPositions(c.scratch, len(c.records)-i)
		}
		var headers func(yield func(string, []byte) bool)
		if len(r.Headers) > 0 {
			headers = func(yield func(string, []byte) bool) {
				for _, h := range r.Headers {
					if !yield(h.Key, h.Value) {
						return
					}
				}
			}
		}
		c.digests[i] = dg.Digest(r.Key, r.Value, headers)
		if j := first.addOrGet(r.IdempotencyKey, i, c.records); j != i {
			if c.digests[j] != c.digests[i] {
				return fmt.Errorf("%w: key %q at records %d and %d", dedup.ErrIdempotencyConflict, r.IdempotencyKey, j, i)
			}
			c.sameAs[i] = j
		}
	}
	return nil
}

// keyPositionSeed hashes idempotency keys within one call.
var keyPositionSeed = maphash.MakeSeed()

// keyPositions maps the idempotency keys of one call to the position of
// the first record with each: open addressing over record positions, with
// no per-key allocation (a Go map of strings costs several times more per
// record, and every keyed record passes here).
type keyPositions struct {
	slots []int32 // position+1; 0 is empty
}

func newKeyPositions(scratch *keyedScratch, n int) keyPositions {
	size := 16
	for size < 2*n {
		size *= 2
	}
	scratch.slots = grow(scratch.slots, size)
	clear(scratch.slots)
	return keyPositions{slots: scratch.slots}
}

// addOrGet returns the position of the first record keyed key, recording
// pos as that record if there is none. records[p].IdempotencyKey is the key
// of a recorded position p.
func (k keyPositions) addOrGet(key string, pos int, records []backend.ProduceRecord) int {
	mask := uint64(len(k.slots) - 1)
	for i := maphash.String(keyPositionSeed, key) & mask; ; i = (i + 1) & mask {
		p := k.slots[i]
		if p == 0 {
			k.slots[i] = int32(pos + 1)
			return pos
		}
		if records[p-1].IdempotencyKey == key {
			return int(p - 1)
		}
	}
}

// produceRound appends the unanswered records; with lookup it first answers
// keyed records found in the window. The first round skips the lookups:
// new keys (the common case) then cost no window access here, and the state
// machine refuses the whole append with backend.ErrDedupRace if any key is already
// held, after which the next round looks them up (duplicates and conflicts
// cost one extra Raft round trip, retries being rare). backend.ErrDedupRace also
// means a concurrent call committed one of the keys first.
func (p *producer) produceRound(ctx context.Context, c *produceCall, lookup bool) error {
	window := c.topic.Dedup()
	now := c.g.fsm.Now()
	var pending []int
	for i := range c.records {
		r := &c.records[i]
		if c.res.Results[i].Offset >= 0 || c.sameAs != nil && c.sameAs[i] >= 0 {
			continue
		}
		if lookup && r.IdempotencyKey != "" {
			if e, ok := window.Lookup(r.IdempotencyKey, now); ok {
				if e.Digest != c.digests[i] {
					return fmt.Errorf("%w: key %q (record %d) was appended at %s-%d@%d", dedup.ErrIdempotencyConflict, r.IdempotencyKey, i, c.topic.Name, e.Partition, e.Offset)
				}
				c.res.Results[i] = backend.RecordResult{Partition: e.Partition, Offset: e.Offset, Duplicate: true}
				c.res.Duplicates++
				continue
			}
		}
		pending = append(pending, i)
	}
	if len(pending) == 0 {
		return nil
	}
	groups, err := p.route(c, pending)
	if err != nil {
		return err
	}
	app := fsm.Append{Topic: c.topic.Name, Batches: make([]fsm.PartitionBatch, len(groups))}
	for i, g := range groups {
		bb, err := batch.Build(g.records)
		if err != nil {
			return fmt.Errorf("%w: build batch for %s-%d: %v", backend.ErrInvalidArgument, c.topic.Name, g.partition, err)
		}
		if pr := c.producer; pr != nil {
			seq, ok := pr.BaseSequences[g.partition]
			if !ok {
				return fmt.Errorf("%w: producer %d has no sequence for partition %d", backend.ErrInvalidArgument, pr.ID, g.partition)
			}
			batch.SetProducer(bb, pr.ID, pr.Epoch, seq)
		}
		app.Batches[i] = fsm.PartitionBatch{Partition: g.partition, Batch: bb, Keys: g.keys}
	}
	if pr := c.producer; pr != nil && len(pr.BaseSequences) != len(groups) {
		return fmt.Errorf("%w: producer %d has sequences for %d partitions, the records go to %d", backend.ErrInvalidArgument, pr.ID, len(pr.BaseSequences), len(groups))
	}
	var queued func()
	if pr := c.producer; pr != nil {
		queued = p.holdInOrder(ctx, c.topic.Name, pr, app)
	}
	start := time.Now()
	// route refused keyless records if the topic was compacted; if it
	// became compacted since, Append checks the batches.
	checked := checkedCRC // built here
	if compacted(c.topic) {
		checked |= checkedKeys
	}
	r, err := p.proposeOn(ctx, c.g, app, checked, queued)
	if err != nil {
		return err
	}
	c.res.CommitTime = time.Since(start)
	c.res.ProducerChecked = c.producer != nil
	// Only a producer's batch is refused alone or answered as a
	// duplicate (its partition's producer state judged it).
	var refused error
	nrefused := 0
	for i, g := range groups {
		if r.Errors != nil && r.Errors[i] != nil {
			if refused == nil {
				refused = fmt.Errorf("%s-%d: %w", c.topic.Name, g.partition, r.Errors[i])
			}
			nrefused++
			continue
		}
		dup := r.Duplicates != nil && r.Duplicates[i]
		if !dup {
			c.res.Appended += len(g.positions)
			c.res.Bytes += len(app.Batches[i].Batch)
		}
		for j, pos := range g.positions {
			c.res.Results[pos] = backend.RecordResult{Partition: g.partition, Offset: r.BaseOffsets[i] + int64(j), Duplicate: dup}
		}
	}
	if refused != nil && nrefused < len(groups) {
		return fmt.Errorf("%w (the call's other partitions were written: sent again, they are answered as duplicates)", refused)
	}
	return refused
}

// holdInOrder waits while a producer's batch of app is ahead of the
// producer's last batch of its partition queued on this node
// (produce_order.go), and returns the function that notes app's
// batches queued.
func (p *producer) holdInOrder(ctx context.Context, topic string, pr *backend.ProducerSequence, app fsm.Append) func() {
	for _, b := range app.Batches {
		p.n.order.wait(ctx, orderKey{topic: topic, partition: b.Partition, id: pr.ID}, pr.Epoch, pr.BaseSequences[b.Partition])
	}
	return func() {
		for _, b := range app.Batches {
			info, _ := batch.Peek(b.Batch) // built here
			p.n.order.queued(orderKey{topic: topic, partition: b.Partition, id: pr.ID}, pr.Epoch, info.BaseSequence, lastSequence(info))
		}
	}
}

// lastSequence is the sequence of a producer's batch's last record,
// wrapping past MaxInt32 to 0.
func lastSequence(info batch.Info) int32 {
	return int32((int64(info.BaseSequence) + int64(info.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

// route validates the records at the given positions and groups them by
// partition, in order of first appearance. The groups' slices are cut from
// one array each, sized by a first pass: growing them record by record
// allocated several times over for every group of every call.
func (p *producer) route(c *produceCall, positions []int) ([]*partitionGroup, error) {
	t := c.topic
	n := int32(len(t.Partitions))
	maxBytes := t.MaxBatchBytes()
	now := p.n.Now().UnixMilli()
	keysRequired := compacted(t)
	byPart := make(map[int32]*partitionGroup)
	var groups []*partitionGroup
	of := make([]*partitionGroup, len(positions))
	nkeys := 0
	for k, i := range positions {
		r := &c.records[i]
		part, hasPart := r.Partition, r.HasPartition
		if c.partitions != nil {
			part, hasPart = c.partitions[i], true
		}
		switch {
		case hasPart:
			if part < 0 || part >= n {
				return nil, fmt.Errorf("%w: %s has %d partitions, not %d", backend.ErrUnknownPartition, t.Name, n, part)
			}
		case r.Key != nil:
			part = partition.ForKey(r.Key, n)
		default:
			part = int32(p.rr.next(t.Name) % uint32(n))
		}
		if r.TimestampMs < 0 {
			return nil, fmt.Errorf("%w: record %d: negative timestamp %d", backend.ErrInvalidArgument, i, r.TimestampMs)
		}
		if keysRequired && r.Key == nil {
			return nil, keyRequired(t, fmt.Sprintf("record %d", i))
		}
		if size := batch.RecordSize(batch.Record{Key: r.Key, Value: r.Value, Headers: r.Headers}); int64(size) > maxBytes {
			return nil, fmt.Errorf("%w: record %d is %d bytes, %s max.message.bytes is %d", backend.ErrRecordTooLarge, i, size, t.Name, maxBytes)
		}
		g, ok := byPart[part]
		if !ok {
			g = &partitionGroup{partition: part}
			byPart[part] = g
			groups = append(groups, g)
		}
		g.n++
		if r.IdempotencyKey != "" {
			g.nkeys++
			nkeys++
		}
		of[k] = g
	}
	allRecs := make([]batch.Record, len(positions))
	allPos := make([]int, len(positions))
	var allKeys []fsm.RecordKey
	if nkeys > 0 {
		allKeys = grow(c.scratch.keys, nkeys)
		c.scratch.keys = allKeys
	}
	for _, g := range groups {
		g.records, allRecs = allRecs[:0:g.n], allRecs[g.n:]
		g.positions, allPos = allPos[:0:g.n], allPos[g.n:]
		g.keys, allKeys = allKeys[:0:g.nkeys], allKeys[g.nkeys:]
	}
	for k, i := range positions {
		g := of[k]
		r := &c.records[i]
		if r.IdempotencyKey != "" {
			g.keys = append(g.keys, fsm.RecordKey{Index: int32(len(g.records)), Key: r.IdempotencyKey, Digest: c.digests[i]})
		}
		ts := r.TimestampMs
		if ts == 0 {
			ts = now
		}
		g.records = append(g.records, batch.Record{Timestamp: ts, Key: r.Key, Value: r.Value, Headers: r.Headers})
		g.positions = append(g.positions, i)
	}
	return groups, nil
}

// roundRobin holds the round-robin counter of each topic for keyless
// records.
type roundRobin struct {
	mu sync.Mutex
	// counters by topic; guarded by mu (the counters themselves are
	// atomic).
	counters map[string]*atomic.Uint32
}

// next returns the next counter value for keyless records of a topic.
func (r *roundRobin) next(topic string) uint32 { return r.add(topic, 1) }

// add adds n to a topic's counter and returns its value before.
func (r *roundRobin) add(topic string, n uint32) uint32 {
	r.mu.Lock()
	c, ok := r.counters[topic]
	if !ok {
		if r.counters == nil {
			r.counters = map[string]*atomic.Uint32{}
		}
		c = new(atomic.Uint32)
		r.counters[topic] = c
	}
	r.mu.Unlock()
	return c.Add(n) - n
}

// forget drops a deleted topic's counter.
func (r *roundRobin) forget(topic string) {
	r.mu.Lock()
	delete(r.counters, topic)
	r.mu.Unlock()
}

// appendChecks says what the caller of appendBatches, appendOn or
// proposeOn has checked of an append's batches in this process, so the
// proposer does not check it again. Nothing of it travels to another
// node: an append sent to a data group's leader elsewhere is checked
// there whole.
type appendChecks uint8

const (
	// checkedKeys: the caller built the batches from records it checked
	// have keys (Backend.Produce, on a topic that was compacted then),
	// which spares decoding them again.
	checkedKeys appendChecks = 1 << iota
	// checkedCRC: each batch's CRC-32C was verified since it was read off
	// the network (the Kafka listener's checks), or the caller built the
	// batch. The state machine verifies it again before writing it
	// (docs/architecture.md, "Batch checks").
	checkedCRC
)

// appendBatches proposes the batches of a on p's node (Backend.Append).
func (p *producer) appendBatches(ctx context.Context, a fsm.Append, checked appendChecks) ([]int64, error) {
	t, err := p.n.fsm.Topic(a.Topic)
	if err != nil {
		return nil, err
	}
	if t.Placement != nil {
		return p.appendSpread(ctx, t, a, checked)
	}
	return p.appendOn(ctx, p.n.metaGroup(), a, checked)
}

// appendOn is appendBatches on group g, which holds every partition of
// a.
func (p *producer) appendOn(ctx context.Context, g groupHandle, a fsm.Append, checked appendChecks) ([]int64, error) {
	r, err := p.proposeOn(ctx, g, a, checked, nil)
	if err != nil {
		return nil, err
	}
	if r.Errors != nil {
		return r.BaseOffsets, &backend.PartialAppendError{Offsets: r.BaseOffsets, Errs: r.Errors}
	}
	return r.BaseOffsets, nil
}

// proposeOn checks a against group g's state and proposes it there, and
// returns its result as applied: the base offset of each batch and, for
// producers' batches, which were refused and which were duplicates.
// queued, if not nil, is called once a is queued (groupHandle's
// proposeAppend).
func (p *producer) proposeOn(ctx context.Context, g groupHandle, a fsm.Append, checked appendChecks, queued func()) (fsm.AppendResult, error) {
	t, err := g.topic(a.Topic)
	if err != nil {
		return fsm.AppendResult{}, err
	}
	validate := fsm.ValidateAppend
	if checked&checkedCRC != 0 {
		validate = fsm.ValidateVerifiedAppend
	}
	if err := validate(t, a); err != nil {
		return fsm.AppendResult{}, err
	}
	if checked&checkedKeys == 0 {
		if err := checkKeys(t, a, checked&checkedCRC != 0); err != nil {
			return fsm.AppendResult{}, err
		}
	}

	for _, pb := range a.Batches {
		info, _ := batch.Peek(pb.Batch) // validated above
		if err := p.n.CheckCompression(info.Compression()); err != nil {
			return fsm.AppendResult{}, err
		}
	}
	// The leader refuses early what Apply would refuse (Apply decides).
	if err := g.fsm.Admit(t, a); err != nil {
		return fsm.AppendResult{}, err
	}
	res, err := g.proposeAppend(ctx, fsm.EncodeAppend(p.n.cfg.Now().UnixNano(), a), queued)
	if err != nil {
		return fsm.AppendResult{}, err
	}
	r, ok := res.(fsm.AppendResult)
	if !ok {
		return fsm.AppendResult{}, fmt.Errorf("append: unexpected result %T", res)
	}
	return r, nil
}
