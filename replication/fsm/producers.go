package fsm

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// Idempotent Kafka producers (docs/kafka.md, "Idempotent producers").
//
// A producer id comes from the cluster's allocator (apply_producer_init.go),
// which never hands out an id twice: ids grow by one per InitProducerId,
// and a cluster restored from a backup starts its ids above every id the
// backup's cluster could have handed out since (ForNewCluster).
//
// Each partition keeps the state of the producers that wrote to it (a
// Partition's producers), as Kafka's ProducerStateManager does: a
// producer's epoch, the first and last sequence and base offset of its
// last five batches, and the command time of its last append. The state
// belongs to the partition, not the cluster, so it moves with the
// partition wherever the partition goes. A batch is judged by Kafka's
// rules (producerState.check): a repeat of one of the last five batches of
// the same epoch is a duplicate, answered with its original base offset
// and not written again; an older epoch is ErrInvalidProducerEpoch; a new
// epoch must start at sequence 0 and a batch of the same epoch must follow
// the last one (ErrOutOfOrderSequence otherwise); a producer the
// partition does not know (never seen, expired, or evicted) is accepted at
// any sequence, as Kafka accepts it since KIP-360.
//
// A producer expires ProducerIDExpiration after its last append, by
// command time (never the wall clock), and a partition keeps at most
// MaxProducersPerPartition producers: a new one beyond that evicts the
// expired ones, then the one idle longest.

// ProducerIDExpiration is how long a partition remembers an idle
// producer: Kafka's producer.id.expiration.ms default (a day).
const ProducerIDExpiration = 24 * time.Hour

// MaxProducersPerPartition bounds the producers a partition remembers,
// so a flood of producer ids (KIP-936) cannot grow a partition's state
// without limit.
const MaxProducersPerPartition = 10_000

// producerBatches is how many of a producer's latest batches a partition
// remembers, Kafka's 5 (which is why clients keep at most five requests in
// flight per partition when idempotent).
const producerBatches = 5

// producerBatch is one remembered batch: its first and last sequence and
// the offset its first record got.
type producerBatch struct {
	FirstSeq, LastSeq int32
	Base              int64
}

// producerEntry is one producer's state on a partition.
type producerEntry struct {
	Epoch int16
	// Time is the command time of its last append (Unix ns).
	Time int64
	// Batches are its last batches of Epoch, oldest first, at most
	// producerBatches.
	Batches []producerBatch
}

// producerState is a partition's producers by id. Only the Raft goroutine
// touches it (apply and Snapshot); decisions never depend on map order.
type producerState struct {
	m map[int64]*producerEntry
}

// lastSequence is Kafka's: the sequence of a batch's last record,
// wrapping past MaxInt32 to 0.
func lastSequence(base, lastOffsetDelta int32) int32 {
	if base > math.MaxInt32-lastOffsetDelta {
		return lastOffsetDelta - (math.MaxInt32 - base) - 1
	}
	return base + lastOffsetDelta
}

// inSequence is Kafka's: next follows last, wrapping past MaxInt32 to 0.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || next == 0 && last == math.MaxInt32
}

// live returns the producer's entry, nil when the partition does not know
// it or it has expired at now.
func (s *producerState) live(id int64, now int64) *producerEntry {
	e := s.m[id]
	if e == nil || now-e.Time >= int64(ProducerIDExpiration) {
		return nil
	}
	return e
}

// check judges a producer's batch against the partition's state at now:
// dup with the original base offset for a repeat of one of the last
// batches, or an error to refuse it with, or neither to append it.
func (s *producerState) check(info *batch.Info, now int64) (base int64, dup bool, err error) {
	e := s.live(info.ProducerID, now)
	if e == nil {
		return 0, false, nil
	}
	first := info.BaseSequence
	last := lastSequence(first, info.LastOffsetDelta)
	if info.ProducerEpoch == e.Epoch {
		for _, b := range e.Batches {
			if b.FirstSeq == first && b.LastSeq == last {
				return b.Base, true, nil
			}
		}
	}
	switch {
	case info.ProducerEpoch < e.Epoch:
		return 0, false, fmt.Errorf("%w: producer %d epoch %d, the partition has seen epoch %d", backend.ErrInvalidProducerEpoch, info.ProducerID, info.ProducerEpoch, e.Epoch)
	case info.ProducerEpoch > e.Epoch:
		if first != 0 {
			return 0, false, fmt.Errorf("%w: producer %d starts epoch %d at sequence %d, not 0", backend.ErrOutOfOrderSequence, info.ProducerID, info.ProducerEpoch, first)
		}
	case len(e.Batches) > 0 && !inSequence(e.Batches[len(e.Batches)-1].LastSeq, first):
		return 0, false, fmt.Errorf("%w: producer %d epoch %d sent sequence %d after %d", backend.ErrOutOfOrderSequence, info.ProducerID, info.ProducerEpoch, first, e.Batches[len(e.Batches)-1].LastSeq)
	}
	return 0, false, nil
}

// record notes a producer's batch appended at base, at now (after check
// let it through).
func (s *producerState) record(info *batch.Info, base, now int64) {
	if s.m == nil {
		s.m = map[int64]*producerEntry{}
	}
	e := s.live(info.ProducerID, now)
	if e == nil {
		delete(s.m, info.ProducerID) // expired: starts afresh
		s.makeRoom(now)
		e = &producerEntry{Epoch: info.ProducerEpoch}
		s.m[info.ProducerID] = e
	}
	if info.ProducerEpoch != e.Epoch {
		e.Epoch, e.Batches = info.ProducerEpoch, e.Batches[:0]
	}
	if len(e.Batches) == producerBatches {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:producerBatches-1]
	}
	e.Batches = append(e.Batches, producerBatch{FirstSeq: info.BaseSequence, LastSeq: lastSequence(info.BaseSequence, info.LastOffsetDelta), Base: base})
	e.Time = now
}

// makeRoom drops producers until one more fits: the expired ones, then
// the one idle longest (the lowest id among equals), whatever the map's
// order.
func (s *producerState) makeRoom(now int64) {
	if len(s.m) < MaxProducersPerPartition {
		return
	}
	for id := range s.m {
		if s.live(id, now) == nil {
			delete(s.m, id)
		}
	}
	for len(s.m) >= MaxProducersPerPartition {
		victim, oldest := int64(0), int64(math.MaxInt64)
		for id, e := range s.m {
			if e.Time < oldest || e.Time == oldest && id < victim {
				victim, oldest = id, e.Time
			}
		}
		delete(s.m, victim)
	}
}

// producerManifest is one producer in a snapshot: its id, epoch, last
// append time and batches as [first sequence, last sequence, base offset].
type producerManifest struct {
	ID      int64      `json:"id"`
	Epoch   int16      `json:"epoch"`
	Time    int64      `json:"time"`
	Batches [][3]int64 `json:"batches"`
}

// snapshot returns the producers live at now, by id.
func (s *producerState) snapshot(now int64) []producerManifest {
	var out []producerManifest
	for id := range s.m {
		e := s.live(id, now)
		if e == nil {
			continue
		}
		pm := producerManifest{ID: id, Epoch: e.Epoch, Time: e.Time, Batches: make([][3]int64, len(e.Batches))}
		for i, b := range e.Batches {
			pm.Batches[i] = [3]int64{int64(b.FirstSeq), int64(b.LastSeq), b.Base}
		}
		out = append(out, pm)
	}
	slices.SortFunc(out, func(a, b producerManifest) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// restoreProducers rebuilds a partition's producer state from a snapshot's.
func restoreProducers(ps []producerManifest) (producerState, error) {
	if len(ps) > MaxProducersPerPartition {
		return producerState{}, fmt.Errorf("%d producers, at most %d", len(ps), MaxProducersPerPartition)
	}
	s := producerState{m: make(map[int64]*producerEntry, len(ps))}
	for _, p := range ps {
		if len(p.Batches) > producerBatches || p.ID < 0 {
			return producerState{}, fmt.Errorf("producer %d with %d batches", p.ID, len(p.Batches))
		}
		e := &producerEntry{Epoch: p.Epoch, Time: p.Time, Batches: make([]producerBatch, len(p.Batches))}
		for i, b := range p.Batches {
			e.Batches[i] = producerBatch{FirstSeq: int32(b[0]), LastSeq: int32(b[1]), Base: b[2]}
		}
		s.m[p.ID] = e
	}
	return s, nil
}

// ProducerIDRestoreBase is the first producer id a cluster restored from a
// backup at restoredAt hands out (unless the backup's cluster had gone
// further): the restore's Unix second times 2^31. A backup's cluster may
// have handed out ids after the backup was taken, which the restored
// cluster does not know of; starting above them keeps a client of the old
// cluster from sharing an id with a new producer, whose batches would
// then be taken for its duplicates. Every earlier restore started at a
// lower second, and no cluster hands out 2^31 ids a second, so none
// reaches this base; two restores of one backup in the same second (or
// with the clock set back) are the exception.
func ProducerIDRestoreBase(restoredAt time.Time) int64 {
	sec := max(restoredAt.Unix(), 0)
	if sec >= 1<<32 {
		return math.MaxInt64 / 2
	}
	return sec << 31
}

// hasProducerBatch reports whether an append carries a batch with a
// producer id (its payload version is then appendProducerVersion).
func hasProducerBatch(a Append) bool {
	for _, b := range a.Batches {
		if info, err := batch.Peek(b.Batch); err == nil && info.ProducerID >= 0 {
			return true
		}
	}
	return false
}

// EncodeProducerInit encodes a ProducerInit.
func EncodeProducerInit(now int64) ([]byte, error) {
	return encodeJSONCommand(CmdProducerInit, now, ProducerInit{})
}
