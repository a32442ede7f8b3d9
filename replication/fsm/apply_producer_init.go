package fsm

import (
	"fmt"
	"math"
)

// ProducerInit allocates a Kafka producer id (InitProducerId without a
// transactional id), at ProducerLevel. Kafka hands an idempotent producer
// a new id with epoch 0 at every InitProducerId, whatever id and epoch it
// names, and so does this.
type ProducerInit struct{}

// ProducerInitResult is an applied ProducerInit's id and epoch.
type ProducerInitResult struct {
	ID    int64
	Epoch int16
}

// applyProducerInit hands out the allocator's next id: ids grow by one
// and are never handed out twice (a restore from a backup starts above
// the backup's, see ProducerIDRestoreBase).
func (f *FSM) applyProducerInit(_ uint64, _ int64, _ ProducerInit) any {
	id := f.nextProducerID
	if id == math.MaxInt64 {
		return fmt.Errorf("producer ids exhausted")
	}
	f.nextProducerID++
	return ProducerInitResult{ID: id}
}

// NextProducerID is the id the next ProducerInit hands out.
func (f *FSM) NextProducerID() int64 { return f.nextProducerID }
