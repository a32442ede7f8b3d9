package server

import (
	"fmt"

	"github.com/logd-dev/logd/replication"
)

func unknownPartition(t *replication.Topic, p int32) error {
	return fmt.Errorf("%w: %s has %d partitions, not %d", replication.ErrUnknownPartition, t.Name, len(t.Partitions), p)
}

func recordTooLarge(t *replication.Topic, i, size int, max int64) error {
	return fmt.Errorf("%w: record %d is %d bytes, %s max.message.bytes is %d", replication.ErrRecordTooLarge, i, size, t.Name, max)
}
