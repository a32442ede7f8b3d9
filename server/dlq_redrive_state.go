package server

import (
	"slices"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// redriveMarks tells, for a dead letter, which redrive job moved it or
// will: the state is not kept per dead letter but derived from the jobs
// the state machine keeps and their positions (docs/guide.md, "Redriven
// dead letters"), so listing needs no command of its own.
type redriveMarks struct {
	jobs []markJob // oldest first
}

type markJob struct {
	job      backend.RedriveJob
	position []int64
}

// redriveMarksOf collects the jobs of a dead-letter topic with their
// positions as this node applied them.
func (s *Server) redriveMarksOf(topic string) redriveMarks {
	var m redriveMarks
	for _, j := range s.b.RedriveJobs() {
		if j.Spec.DeadLetterTopic == topic {
			m.jobs = append(m.jobs, markJob{job: j, position: s.b.RedrivePosition(j)})
		}
	}
	return m
}

// mark sets out's redrive fields from the oldest job that moved the dead
// letter (selected it, passed it and let it through its loop guard), or
// else the oldest running job that will.
func (m redriveMarks) mark(out *logdv1.DeadLetter, d backend.DeadLetter, key []byte) {
	var pending *backend.RedriveJob
	for i := range m.jobs {
		mj := &m.jobs[i]
		sp := mj.job.Spec
		if !selects(sp, out.Partition, out.Offset) || !backend.RedriveMatch(sp, d, key) {
			continue
		}
		guard := sp.MaxRedrives
		if guard == 0 {
			guard = backend.DefaultMaxRedrives
		}
		if d.Redrives >= guard {
			continue // refused by this job's loop guard
		}
		p := int(out.Partition)
		if p < len(mj.position) && out.Offset < mj.position[p] {
			out.RedriveJob, out.RedriveMs, out.RedrivePending = mj.job.ID, mj.job.UpdatedNanos/1e6, false
			return
		}
		if pending == nil && !mj.job.Ended() {
			pending = &mj.job
		}
	}
	if pending != nil {
		out.RedriveJob, out.RedrivePending = pending.ID, true
	}
}

// selects reports whether a job of spec sp reads the dead letter at
// partition/offset: within its offset bounds and the ends it stops at,
// and among its named records when it names any.
func selects(sp backend.RedriveSpec, partition int32, offset int64) bool {
	p := int(partition)
	switch {
	case p >= len(sp.Ends) || offset >= sp.Ends[p] || offset < sp.FromOffset:
		return false
	case sp.ToOffset > 0 && offset >= sp.ToOffset:
		return false
	case len(sp.Records) > 0:
		return slices.Contains(sp.Records, backend.RedriveRecord{Partition: partition, Offset: offset})
	}
	return true
}
