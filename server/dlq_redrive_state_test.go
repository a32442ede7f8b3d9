package server

import (
	"testing"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// TestRedriveMarks: a dead letter is marked by the oldest job that
// selects it, passed it and let it through its loop guard, else by the
// oldest running job that will reach it.
func TestRedriveMarks(t *testing.T) {
	ends := []int64{10, 10}
	job := func(id, state string, updated int64, pos []int64, sp backend.RedriveSpec) markJob {
		sp.Ends = ends
		return markJob{job: backend.RedriveJob{ID: id, State: state, Spec: sp, UpdatedNanos: updated * 1e6}, position: pos}
	}
	done, running := backend.RedriveDone, backend.RedriveRunning
	tests := []struct {
		name      string
		jobs      []markJob
		partition int32
		offset    int64
		reason    string
		redrives  int
		want      string // job id, "" for none
		pending   bool
		at        int64
	}{
		{name: "no job", offset: 3, reason: "rejected"},
		{name: "passed by a done job", jobs: []markJob{job("rd1", done, 5, ends, backend.RedriveSpec{})}, offset: 3, reason: "rejected", want: "rd1", at: 5},
		{name: "another reason", jobs: []markJob{job("rd1", done, 5, ends, backend.RedriveSpec{Reasons: []string{"expired"}})}, offset: 3, reason: "rejected"},
		{name: "refused by the loop guard", jobs: []markJob{job("rd1", done, 5, ends, backend.RedriveSpec{})}, offset: 3, reason: "rejected", redrives: 3},
		{name: "outside the offset bounds", jobs: []markJob{job("rd1", done, 5, ends, backend.RedriveSpec{FromOffset: 4})}, offset: 3, reason: "rejected"},
		{name: "beyond the job's ends", jobs: []markJob{job("rd1", done, 5, ends, backend.RedriveSpec{})}, offset: 10, reason: "rejected"},
		{name: "not among its records", jobs: []markJob{job("rd1", done, 5, ends, backend.RedriveSpec{Records: []backend.RedriveRecord{{Partition: 1, Offset: 3}}})}, offset: 3, reason: "rejected"},
		{name: "among its records", jobs: []markJob{job("rd1", done, 5, ends, backend.RedriveSpec{Records: []backend.RedriveRecord{{Partition: 1, Offset: 3}}})}, partition: 1, offset: 3, reason: "rejected", want: "rd1", at: 5},
		{name: "a running job not there yet", jobs: []markJob{job("rd1", running, 5, []int64{2, 0}, backend.RedriveSpec{})}, offset: 3, reason: "rejected", want: "rd1", pending: true},
		{name: "a stopped job that did not reach it", jobs: []markJob{job("rd1", backend.RedriveStopped, 5, []int64{2, 0}, backend.RedriveSpec{})}, offset: 3, reason: "rejected"},
		{name: "the oldest that moved it, not a pending one",
			jobs:   []markJob{job("rd1", running, 5, []int64{2, 0}, backend.RedriveSpec{}), job("rd2", done, 7, ends, backend.RedriveSpec{}), job("rd3", done, 9, ends, backend.RedriveSpec{})},
			offset: 3, reason: "rejected", want: "rd2", at: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &logdv1.DeadLetter{Partition: tt.partition, Offset: tt.offset}
			redriveMarks{jobs: tt.jobs}.mark(out, backend.DeadLetter{Reason: tt.reason, Redrives: tt.redrives}, nil)
			if out.RedriveJob != tt.want || out.RedrivePending != tt.pending || out.RedriveMs != tt.at {
				t.Fatalf("marked job %q pending %v at %d; want %q pending %v at %d", out.RedriveJob, out.RedrivePending, out.RedriveMs, tt.want, tt.pending, tt.at)
			}
		})
	}
}
