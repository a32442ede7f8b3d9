package fsm

import (
	"errors"
	"fmt"

	"github.com/logd-dev/logd/backend"
)

// ErrStalePlacement is the error of a partition-adopt whose placement
// epoch is older than the one the state machine holds for the topic.
// Errors that carry it are *PlacementEpochError.
var ErrStalePlacement = errors.New("fsm: stale placement epoch")

// PartitionElsewhereError names a partition this state machine does not
// host and the data group that does.
type PartitionElsewhereError struct {
	Topic     string
	Partition int32
	// Group is the data group the topic's placement names for the
	// partition.
	Group uint64
}

func (e *PartitionElsewhereError) Error() string {
	return fmt.Sprintf("%v: %s-%d is in data group %d", backend.ErrPartitionElsewhere, e.Topic, e.Partition, e.Group)
}

// Unwrap makes errors.Is(err, backend.ErrPartitionElsewhere) hold: the
// error of a command or read that names a partition another data group
// hosts, for which this state machine holds no log (docs/architecture.md,
// "Data groups").
func (e *PartitionElsewhereError) Unwrap() error { return backend.ErrPartitionElsewhere }

// PlacementEpochError is a partition-adopt refused because the topic's
// placement is already at a later epoch.
type PlacementEpochError struct {
	Topic string
	// Epoch is the adopt's epoch, Current the topic's.
	Epoch, Current uint64
}

func (e *PlacementEpochError) Error() string {
	return fmt.Sprintf("%v: adopt of %s at placement epoch %d, the topic is at %d", ErrStalePlacement, e.Topic, e.Epoch, e.Current)
}

// Unwrap makes errors.Is(err, ErrStalePlacement) hold.
func (e *PlacementEpochError) Unwrap() error { return ErrStalePlacement }
