package server

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/replication"
)

// maxDedupRounds bounds how often a produce call re-checks its keys after
// a concurrent call committed one of them first.
const maxDedupRounds = 8

// partitionGroup collects the records of one produce call bound for one
// partition, with their positions in the request.
type partitionGroup struct {
	partition int32
	records   []batch.Record
	positions []int
	keys      []replication.RecordKey
	// n and nkeys count the group's records and keyed records.
	n, nkeys int
}

// produceCall is one Produce request being answered.
type produceCall struct {
	topic   *replication.Topic
	records []*logdv1.Record
	// digests[i] is record i's payload digest if it has an idempotency
	// key; sameAs[i] is the position of an earlier record of the call with
	// the same key and payload, or -1. Both are nil in a call without keys.
	digests []dedup.Digest
	sameAs  []int
	results []*logdv1.RecordResult
	// scratch holds digests, sameAs and the call's key tables; nil in a
	// call without keys.
	scratch *keyedScratch
}

// keyedScratch is the memory a call with idempotency keys works in,
// pooled: allocated per call it was about 100 bytes per keyed record, and
// every keyed record of every call passes here.
type keyedScratch struct {
	digests  []dedup.Digest
	sameAs   []int
	slots    []int32
	keys     []replication.RecordKey
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

// Produce validates every record, answers records whose idempotency key is
// already in the topic's window, routes the rest to partitions (explicit,
// else murmur2 of the key, else round-robin), builds one record batch per
// partition and appends them all in one Raft entry. It answers only after
// that entry is committed and applied; an invalid record refuses the whole
// call and nothing is written.
func (s *Server) Produce(ctx context.Context, req *connect.Request[logdv1.ProduceRequest]) (*connect.Response[logdv1.ProduceResponse], error) {
	m := req.Msg
	if err := partition.ValidateTopicName(m.Topic); err != nil {
		return nil, errInvalid("%v", err)
	}
	switch {
	case len(m.Records) == 0:
		return nil, errInvalid("produce to %q without records", m.Topic)
	case len(m.Records) > MaxRecordsPerProduce:
		return nil, errInvalid("%d records in one produce call; at most %d", len(m.Records), MaxRecordsPerProduce)
	}
	t, err := s.node.FSM().Topic(m.Topic)
	if err != nil {
		return nil, toConnectError(err)
	}
	call := &produceCall{topic: t, records: m.Records, results: make([]*logdv1.RecordResult, len(m.Records))}
	defer call.release()
	if err := call.digestKeys(); err != nil {
		return nil, err
	}
	for round := 0; ; round++ {
		err := s.produceRound(ctx, call, round > 0)
		if !errors.Is(err, replication.ErrDedupRace) {
			if err != nil {
				return nil, err
			}
			break
		}
		if round+1 == maxDedupRounds {
			return nil, toConnectError(fmt.Errorf("%w: %d rounds", err, maxDedupRounds))
		}
	}
	for i, j := range call.sameAs {
		if j >= 0 {
			orig := call.results[j]
			call.results[i] = &logdv1.RecordResult{Partition: orig.Partition, Offset: orig.Offset, Duplicate: true}
		}
	}
	return connect.NewResponse(&logdv1.ProduceResponse{Results: call.results}), nil
}

// digestKeys computes the payload digest of every keyed record and pairs
// records of the call that repeat a key.
func (c *produceCall) digestKeys() error {
	var (
		dg    *dedup.Digester
		first keyPositions
	)
	for i, r := range c.records {
		if r == nil || r.IdempotencyKey == "" {
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
			return errInvalid("record %d: idempotency key of %d bytes; at most %d", i, len(r.IdempotencyKey), dedup.MaxIdempotencyKeyBytes)
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
					if h != nil && !yield(h.Key, h.Value) {
						return
					}
				}
			}
		}
		c.digests[i] = dg.Digest(r.Key, r.Value, headers)
		if j := first.addOrGet(r.IdempotencyKey, i, c.records); j != i {
			if c.digests[j] != c.digests[i] {
				return toConnectError(fmt.Errorf("%w: key %q at records %d and %d", dedup.ErrIdempotencyConflict, r.IdempotencyKey, j, i))
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
func (k keyPositions) addOrGet(key string, pos int, records []*logdv1.Record) int {
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
// machine refuses the whole append with ErrDedupRace if any key is already
// held, after which the next round looks them up (duplicates and conflicts
// cost one extra Raft round trip, retries being rare). ErrDedupRace also
// means a concurrent call committed one of the keys first.
func (s *Server) produceRound(ctx context.Context, c *produceCall, lookup bool) error {
	window := c.topic.Dedup()
	now := s.node.FSM().Now()
	var pending []int
	dups := 0
	for i, r := range c.records {
		if c.results[i] != nil || c.sameAs != nil && c.sameAs[i] >= 0 {
			continue
		}
		if lookup && r != nil && r.IdempotencyKey != "" {
			if e, ok := window.Lookup(r.IdempotencyKey, now); ok {
				if e.Digest != c.digests[i] {
					s.metrics.dedupConflicts.Inc()
					return toConnectError(fmt.Errorf("%w: key %q (record %d) was appended at %s-%d@%d", dedup.ErrIdempotencyConflict, r.IdempotencyKey, i, c.topic.Name, e.Partition, e.Offset))
				}
				c.results[i] = &logdv1.RecordResult{Partition: e.Partition, Offset: e.Offset, Duplicate: true}
				dups++
				continue
			}
		}
		pending = append(pending, i)
	}
	s.metrics.dedupDuplicates.Add(float64(dups))
	if len(pending) == 0 {
		return nil
	}
	groups, err := s.route(c, pending)
	if err != nil {
		return err
	}
	app := replication.Append{Topic: c.topic.Name, Batches: make([]replication.PartitionBatch, len(groups))}
	var bytes int
	for i, g := range groups {
		b, err := batch.Build(g.records)
		if err != nil {
			return errInvalid("build batch for %s-%d: %v", c.topic.Name, g.partition, err)
		}
		bytes += len(b)
		app.Batches[i] = replication.PartitionBatch{Partition: g.partition, Batch: b, Keys: g.keys}
	}
	start := time.Now()
	bases, err := s.node.Append(ctx, app)
	if errors.Is(err, replication.ErrDedupRace) {
		return err
	}
	if err != nil {
		s.queueHealth.refusal(err) // admission control: count it, set retry-after
		return toConnectError(err)
	}
	s.metrics.commitTime.Observe(time.Since(start).Seconds())
	s.metrics.records.WithLabelValues("produce").Add(float64(len(pending)))
	s.metrics.bytes.WithLabelValues("produce").Add(float64(bytes))
	for i, g := range groups {
		for j, pos := range g.positions {
			c.results[pos] = &logdv1.RecordResult{Partition: g.partition, Offset: bases[i] + int64(j)}
		}
	}
	return nil
}

// route validates the records at the given positions and groups them by
// partition, in order of first appearance. The groups' slices are cut from
// one array each, sized by a first pass: growing them record by record
// allocated several times over for every group of every call.
func (s *Server) route(c *produceCall, positions []int) ([]*partitionGroup, error) {
	t := c.topic
	n := int32(len(t.Partitions))
	maxBytes := t.MaxBatchBytes()
	now := time.Now().UnixMilli()
	byPart := make(map[int32]*partitionGroup)
	var groups []*partitionGroup
	recs := make([]batch.Record, len(positions))
	of := make([]*partitionGroup, len(positions))
	nkeys := 0
	for k, i := range positions {
		r := c.records[i]
		if r == nil {
			return nil, errInvalid("record %d is empty", i)
		}
		var p int32
		switch {
		case r.Partition != nil:
			p = *r.Partition
			if p < 0 || p >= n {
				return nil, toConnectError(unknownPartition(t, p))
			}
		case r.Key != nil:
			p = partition.ForKey(r.Key, n)
		default:
			p = int32(s.nextRoundRobin(t.Name) % uint32(n))
		}
		ts := r.TimestampMs
		if ts < 0 {
			return nil, errInvalid("record %d: negative timestamp %d", i, ts)
		}
		if ts == 0 {
			ts = now
		}
		br := batch.Record{Timestamp: ts, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			if h == nil {
				return nil, errInvalid("record %d: empty header", i)
			}
			br.Headers = append(br.Headers, batch.Header{Key: h.Key, Value: h.Value})
		}
		if size := batch.RecordSize(br); int64(size) > maxBytes {
			return nil, toConnectError(recordTooLarge(t, i, size, maxBytes))
		}
		g, ok := byPart[p]
		if !ok {
			g = &partitionGroup{partition: p}
			byPart[p] = g
			groups = append(groups, g)
		}
		g.n++
		if r.IdempotencyKey != "" {
			g.nkeys++
			nkeys++
		}
		recs[k], of[k] = br, g
	}
	allRecs := make([]batch.Record, len(positions))
	allPos := make([]int, len(positions))
	var allKeys []replication.RecordKey
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
		if key := c.records[i].IdempotencyKey; key != "" {
			g.keys = append(g.keys, replication.RecordKey{Index: int32(len(g.records)), Key: key, Digest: c.digests[i]})
		}
		g.records = append(g.records, recs[k])
		g.positions = append(g.positions, i)
	}
	return groups, nil
}
