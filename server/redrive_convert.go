package server

import (
	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// redriveSpec reads a start request; the bounds and the rate are checked
// by the backend, which owns their meaning.
func redriveSpec(m *logdv1.StartRedriveRequest, principal string) backend.RedriveSpec {
	var records []backend.RedriveRecord
	for _, r := range m.Records {
		records = append(records, backend.RedriveRecord{Partition: r.Partition, Offset: r.Offset})
	}
	return backend.RedriveSpec{Records: records,
		DeadLetterTopic: m.DeadLetterTopic, Target: m.Target, Reasons: m.Reasons,
		Key: string(m.Key), HasKey: m.HasKey, SinceMs: m.SinceMs, UntilMs: m.UntilMs,
		FromOffset: m.FromOffset, ToOffset: m.ToOffset, Rate: m.Rate, MaxRedrives: int(m.MaxRedrives),
		Principal: principal,
	}
}

// redriveJobProto is a job with its position as this node applied it.
func (s *Server) redriveJobProto(j backend.RedriveJob) *logdv1.RedriveJob {
	sp := j.Spec
	pos := s.b.RedrivePosition(j)
	var total int64
	for _, end := range sp.Ends {
		from, to := sp.FromOffset, end
		if sp.ToOffset > 0 {
			to = min(to, sp.ToOffset)
		}
		total += max(0, to-from)
	}
	p := j.Progress
	var key []byte
	if sp.HasKey {
		key = []byte(sp.Key)
	}
	var records []*logdv1.RedriveRecordRef
	for _, r := range sp.Records {
		records = append(records, &logdv1.RedriveRecordRef{Partition: r.Partition, Offset: r.Offset})
	}
	return &logdv1.RedriveJob{
		Id: j.ID, State: j.State, Error: j.Error,
		Spec: &logdv1.StartRedriveRequest{DeadLetterTopic: sp.DeadLetterTopic, Target: sp.Target, Reasons: sp.Reasons, Key: key, HasKey: sp.HasKey,
			SinceMs: sp.SinceMs, UntilMs: sp.UntilMs, FromOffset: sp.FromOffset, ToOffset: sp.ToOffset, Rate: sp.Rate, MaxRedrives: int32(sp.MaxRedrives),
			Records: records},
		Progress: &logdv1.RedriveProgress{Scanned: p.Scanned, Redriven: p.Redriven, Duplicates: p.Duplicates, Refused: p.Refused, Skipped: p.Skipped, Bytes: p.Bytes},
		Position: pos, EndOffsets: sp.Ends, Total: total,
		CreatedMs: j.CreatedNanos / 1e6, UpdatedMs: j.UpdatedNanos / 1e6,
		PositionGroup: group.RedrivePrefix + j.ID, Principal: sp.Principal,
	}
}
