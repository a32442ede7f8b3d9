package fsm

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// Redrive command operations.
const (
	// RedriveStart starts a job from Spec; the result is the job, its id
	// derived from the entry's Raft index.
	RedriveStart = "start"
	// RedriveAdvance commits Offsets to the job's group and adds Delta to
	// its counters: the end of one batch.
	RedriveAdvance = "advance"
	// RedriveStop stops a running job (an operator's stop).
	RedriveStop = "stop"
	// RedriveFinish ends a running job as done, or, with Error, as failed.
	RedriveFinish = "finish"
)

// redriveRecordsVersion is the redrive payload version of a start whose
// spec names its records (RedriveSpec.Records), at RedriveSelectLevel: a
// build below it would read the JSON, ignore the field and move more than
// was asked, so it must not be proposed before every member reads it.
const redriveRecordsVersion = 2

// redriveEndsVersion is the redrive payload version of an advance that
// carries the ends of dead-letter partitions another data group hosts
// (Redrive.Ends, PartitionEnd), at PlacedGroupsLevel.
const redriveEndsVersion = 3

// EncodeRedrive encodes a redrive command stamped with now: in payload
// version 1, or redriveRecordsVersion for a start that names records.
func EncodeRedrive(now int64, c Redrive) ([]byte, error) {
	data, err := encodeJSONCommand(CmdRedrive, now, c)
	if err != nil {
		return nil, err
	}
	if len(c.Ends) > 0 {
		data[1] = redriveEndsVersion
	} else if c.Spec != nil && len(c.Spec.Records) > 0 {
		data[1] = redriveRecordsVersion
	}
	return data, nil
}

// decodeRedrive reads a redrive payload; version 1 may not name records.
func decodeRedrive(p []byte, version byte, _ *keyScratch) (Redrive, error) {
	var c Redrive
	if err := json.Unmarshal(p, &c); err != nil {
		return c, fmt.Errorf("%w: redrive: %v", backend.ErrBadCommand, err)
	}
	if version < redriveRecordsVersion && c.Spec != nil && len(c.Spec.Records) > 0 {
		return c, fmt.Errorf("%w: redrive version %d naming records", backend.ErrBadCommand, version)
	}
	if version < redriveEndsVersion && len(c.Ends) > 0 {
		return c, fmt.Errorf("%w: redrive version %d with ends", backend.ErrBadCommand, version)
	}
	return c, nil
}

// Redrive is the payload of CmdRedrive (JSON).
type Redrive struct {
	Op    string          `json:"op"`
	ID    string          `json:"id,omitempty"`
	Spec  *RedriveSpec    `json:"spec,omitempty"`
	Delta RedriveProgress `json:"delta"`
	// Offsets are the position after the batch: the next dead-letter
	// offset of each partition it advanced.
	Offsets []group.OffsetCommit `json:"offsets,omitempty"`
	Error   string               `json:"error,omitempty"`
	// Ends bounds Offsets of dead-letter partitions another data group
	// hosts (PartitionEnd).
	Ends []PartitionEnd `json:"ends,omitempty"`
}

// applyRedrive applies one operation on a job; the result is the job
// after it (RedriveJob) or an error, and a refused operation changes
// nothing. An advance is accepted in any state, since its batch was
// written before a stop could reach the job: the position and counters
// then say what the job did. Stopping an ended job, or finishing one, is
// no change.
func (f *FSM) applyRedrive(index uint64, now int64, c Redrive) any {
	switch c.Op {
	case RedriveStart:
		if c.Spec == nil {
			return fmt.Errorf("%w: redrive start without a spec", backend.ErrInvalidArgument)
		}
		if err := f.ValidateRedriveSpec(*c.Spec); err != nil {
			return err
		}
		j := &RedriveJob{ID: redriveID(index), Spec: *c.Spec, State: RedriveRunning, CreatedNanos: now, UpdatedNanos: now}
		j.Spec.Reasons = slices.Clone(j.Spec.Reasons)
		j.Spec.Ends = slices.Clone(j.Spec.Ends)
		j.Spec.Records = slices.Clone(j.Spec.Records)
		f.redrives.mu.Lock()
		defer f.redrives.mu.Unlock()
		if f.redrives.m == nil {
			f.redrives.m = map[string]*RedriveJob{}
		}
		f.redrives.m[j.ID] = j
		f.pruneRedrivesLocked()
		return j.clone()
	case RedriveAdvance, RedriveStop, RedriveFinish:
	default:
		return fmt.Errorf("%w: redrive operation %q", backend.ErrInvalidArgument, c.Op)
	}
	f.redrives.mu.Lock()
	defer f.redrives.mu.Unlock()
	j, ok := f.redrives.m[c.ID]
	if !ok {
		return fmt.Errorf("%w: %q", backend.ErrUnknownRedrive, c.ID)
	}
	switch c.Op {
	case RedriveAdvance:
		if !c.Delta.valid() {
			return fmt.Errorf("%w: redrive counters %+v", backend.ErrInvalidArgument, c.Delta)
		}
		for _, o := range c.Offsets {
			if o.Topic != j.Spec.DeadLetterTopic {
				return fmt.Errorf("%w: redrive %s commits on %q, reads %q", backend.ErrInvalidArgument, j.ID, o.Topic, j.Spec.DeadLetterTopic)
			}
		}
		if len(c.Offsets) > 0 {
			if err := f.checkHostedOffsets(c.Ends, offsetPartitions(c.Offsets)...); err != nil && len(c.Ends) > 0 {
				return err
			}
			res := f.mutateGroup(RedriveGroup(j.ID), true, func(g *group.ConsumerGroup) (any, error) {
				return nil, g.SetOffsets(now, group.NoFence, c.Offsets, fsmTopics{f, c.Ends})
			})
			if err, ok := res.(error); ok {
				return err
			}
		}
		j.Progress.add(c.Delta)
	case RedriveStop:
		if j.State == RedriveRunning {
			j.State = RedriveStopped
		}
	case RedriveFinish:
		if j.State == RedriveRunning {
			j.State = RedriveDone
			if c.Error != "" {
				j.State = RedriveFailed
				j.Error = truncateUTF8(c.Error, maxRedriveErrorBytes)
			}
		}
	}
	j.UpdatedNanos = now
	return j.clone()
}

// pruneRedrivesLocked drops the oldest ended jobs beyond maxEndedRedrives.
func (f *FSM) pruneRedrivesLocked() {
	var ended []string
	for id, j := range f.redrives.m {
		if j.Ended() {
			ended = append(ended, id)
		}
	}
	if len(ended) <= maxEndedRedrives {
		return
	}
	slices.SortFunc(ended, compareRedriveIDs)
	for _, id := range ended[:len(ended)-maxEndedRedrives] {
		delete(f.redrives.m, id)
	}
}

// truncateUTF8 cuts s to at most n bytes, not inside a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
