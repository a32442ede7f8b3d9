package fsm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/logd-dev/logd/backend"
)

// PartitionEnd is the end offset of a partition another data group hosts,
// as the proposer of a consumer group command read it from that group
// (docs/architecture.md, "Data groups"). The state machine holding the
// consumer group bounds the partition's offsets by it, as it bounds a
// partition of its own by its applied end: an end never decreases, so an
// offset at or below the end one proposer read is at or below the end.
type PartitionEnd struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	End       int64  `json:"end"`
}

// groupEndsVersion is the payload version of group-commit,
// group-reset-offsets, group-auto-reset and group-set-offsets that
// carries ends of partitions hosted elsewhere (PlacedGroupsLevel); a
// build below it would refuse those offsets as hosted elsewhere.
const groupEndsVersion = 2

// groupEndsVersions lists the payload versions of those commands.
var groupEndsVersions = []payloadVersion{
	{version: commandVersion, level: BaseLevel},
	{version: groupEndsVersion, level: PlacedGroupsLevel}, // with ends of partitions hosted elsewhere
}

// endOf returns the end ends gives for a partition, if any.
func endOf(ends []PartitionEnd, topic string, p int32) (int64, bool) {
	for _, e := range ends {
		if e.Topic == topic && e.Partition == p {
			return e.End, true
		}
	}
	return 0, false
}

// elsewhere reports whether err says the partition is hosted elsewhere.
func elsewhere(err error) bool {
	var pe *PartitionElsewhereError
	return errors.As(err, &pe)
}

// groupEnds returns the ends a group command carries (nil for kinds
// without them).
func groupEnds(c any) []PartitionEnd {
	switch c := c.(type) {
	case GroupCommit:
		return c.Ends
	case GroupResetOffsets:
		return c.Ends
	case GroupAutoReset:
		return c.Ends
	case GroupSetOffsets:
		return c.Ends
	}
	return nil
}

// encodeGroupJSON encodes a JSON group command, at groupEndsVersion when
// it carries ends.
func encodeGroupJSON(t CommandType, now int64, body any) ([]byte, error) {
	data, err := encodeJSONCommand(t, now, body)
	if err != nil {
		return nil, err
	}
	if len(groupEnds(body)) > 0 {
		data[1] = groupEndsVersion
	}
	return data, nil
}

// groupJSONCommand is the row of a JSON group command that may carry ends
// (groupEndsVersion): a payload of version 1 with ends is malformed.
func groupJSONCommand[T any](name string, apply func(f *FSM, index uint64, now int64, c T) any) command {
	return row(name, BaseLevel, groupEndsVersions, func(p []byte, version byte, _ *keyScratch) (T, error) {
		var v T
		if err := json.Unmarshal(p, &v); err != nil {
			return v, fmt.Errorf("%w: %s: %v", backend.ErrBadCommand, name, err)
		}
		if version < groupEndsVersion && len(groupEnds(v)) > 0 {
			return v, fmt.Errorf("%w: %s version %d with ends", backend.ErrBadCommand, name, version)
		}
		return v, nil
	}, apply)
}
