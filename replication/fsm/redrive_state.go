package fsm

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// Redrive jobs (from RedriveLevel). A redrive job moves selected dead
// letters of a dead-letter topic back to their origin topic (or another
// target), run by the leader (package replication/redrive). What the
// state machine keeps of a job is its definition (RedriveSpec), its state
// and its counters; its position is the committed offsets, on the
// dead-letter topic, of its consumer group RedriveGroup(id), which each
// progress entry commits together with the counters of the batch it ends
// (one entry per batch, never an offset reset), so a new leader resumes
// from the last batch committed and counters and position always agree.

// Redrive job states.
const (
	RedriveRunning = "running"
	RedriveStopped = "stopped"
	RedriveDone    = "done"
	RedriveFailed  = "failed"
)

// maxEndedRedrives bounds the ended (stopped, done, failed) jobs kept: a
// start beyond it drops the oldest ended job (by id), with its group's
// offsets left as they are (the group is an ordinary, internal one).
const maxEndedRedrives = 100

// maxRedriveErrorBytes bounds a failed job's error text.
const maxRedriveErrorBytes = 1024

// RedriveGroup is the consumer group whose committed offsets on the
// dead-letter topic are job id's position.
func RedriveGroup(id string) string { return group.RedrivePrefix + id }

// RedriveSpec is what a redrive job does; it does not change once started.
type RedriveSpec struct {
	// DeadLetterTopic is read; Target, when set, receives every record,
	// routed by key; when empty each record goes back to its origin topic
	// and partition (its logd-dlq-origin-* headers).
	DeadLetterTopic string `json:"dead_letter_topic"`
	Target          string `json:"target,omitempty"`
	// Reasons: any of these (empty: any). Key: the record key equals it
	// (when HasKey).
	Reasons []string `json:"reasons,omitempty"`
	Key     string   `json:"key,omitempty"`
	HasKey  bool     `json:"has_key,omitempty"`
	// SinceMs and UntilMs bound the dead-lettering time, [Since, Until)
	// in Unix milliseconds; 0 is unbounded.
	SinceMs int64 `json:"since_ms,omitempty"`
	UntilMs int64 `json:"until_ms,omitempty"`
	// FromOffset and ToOffset bound the dead-letter offsets of every
	// partition, [From, To); ToOffset 0 is unbounded.
	FromOffset int64 `json:"from_offset,omitempty"`
	ToOffset   int64 `json:"to_offset,omitempty"`
	// Rate bounds the records redriven per second; 0 is unbounded.
	Rate float64 `json:"rate,omitempty"`
	// MaxRedrives is the loop guard: a record redriven this many times
	// already is refused (counted, left where it is).
	MaxRedrives int `json:"max_redrives"`
	// Ends are the dead-letter topic's end offsets when the job started,
	// one per partition: the job is done when its position reaches them
	// (dead letters written later are for a later job).
	Ends []int64 `json:"ends"`
	// Principal started the job (empty without authentication).
	Principal string `json:"principal,omitempty"`
	// Records, when set, names the dead letters the job may move, in
	// (partition, offset) order without repeats; the filters above still
	// apply to them. Empty: every dead letter the filters select. A start
	// with records is payload version redriveRecordsVersion, at
	// RedriveSelectLevel.
	Records []RedriveRecord `json:"records,omitempty"`
}

// RedriveRecord names one dead letter of a job's dead-letter topic.
type RedriveRecord struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// MaxRedriveRecords bounds the records a job may name.
const MaxRedriveRecords = 10_000

// Selects reports whether the spec lets the job move the dead letter at
// (partition, offset): always without Records, else when it is named.
func (s RedriveSpec) Selects(partition int32, offset int64) bool {
	if len(s.Records) == 0 {
		return true
	}
	_, found := slices.BinarySearchFunc(s.Records, RedriveRecord{Partition: partition, Offset: offset}, compareRedriveRecords)
	return found
}

// NextRecord returns the first named offset of partition at or after
// from; false when the spec names none there (or names no records).
func (s RedriveSpec) NextRecord(partition int32, from int64) (int64, bool) {
	i, _ := slices.BinarySearchFunc(s.Records, RedriveRecord{Partition: partition, Offset: from}, compareRedriveRecords)
	if i < len(s.Records) && s.Records[i].Partition == partition {
		return s.Records[i].Offset, true
	}
	return 0, false
}

// SortRedriveRecords sorts records by partition and offset and drops
// repeats, the order a spec keeps them in.
func SortRedriveRecords(records []RedriveRecord) []RedriveRecord {
	out := slices.Clone(records)
	slices.SortFunc(out, compareRedriveRecords)
	return slices.Compact(out)
}

func compareRedriveRecords(a, b RedriveRecord) int {
	if a.Partition != b.Partition {
		return cmpInt(int64(a.Partition), int64(b.Partition))
	}
	return cmpInt(a.Offset, b.Offset)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// RedriveProgress counts what a job did. Scanned counts dead-letter
// records read; each is then redriven, a duplicate (an earlier attempt of
// the same batch, or an earlier job, wrote it: the idempotency key
// matched), refused by the loop guard, or skipped by the filter.
type RedriveProgress struct {
	Scanned    int64 `json:"scanned"`
	Redriven   int64 `json:"redriven"`
	Duplicates int64 `json:"duplicates"`
	Refused    int64 `json:"refused"`
	Skipped    int64 `json:"skipped"`
	// Bytes of keys and values redriven.
	Bytes int64 `json:"bytes"`
}

func (p *RedriveProgress) add(d RedriveProgress) {
	p.Scanned += d.Scanned
	p.Redriven += d.Redriven
	p.Duplicates += d.Duplicates
	p.Refused += d.Refused
	p.Skipped += d.Skipped
	p.Bytes += d.Bytes
}

func (p RedriveProgress) valid() bool {
	return p.Scanned >= 0 && p.Redriven >= 0 && p.Duplicates >= 0 && p.Refused >= 0 && p.Skipped >= 0 && p.Bytes >= 0 &&
		p.Redriven+p.Duplicates+p.Refused+p.Skipped <= p.Scanned
}

// RedriveJob is a job as the state machine keeps it; a copy the caller
// owns.
type RedriveJob struct {
	ID       string          `json:"id"`
	Spec     RedriveSpec     `json:"spec"`
	State    string          `json:"state"`
	Error    string          `json:"error,omitempty"`
	Progress RedriveProgress `json:"progress"`
	// CreatedNanos and UpdatedNanos are command times.
	CreatedNanos int64 `json:"created_nanos"`
	UpdatedNanos int64 `json:"updated_nanos"`
}

func (j *RedriveJob) clone() RedriveJob {
	c := *j
	c.Spec.Reasons = slices.Clone(j.Spec.Reasons)
	c.Spec.Ends = slices.Clone(j.Spec.Ends)
	c.Spec.Records = slices.Clone(j.Spec.Records)
	return c
}

// Ended reports whether the job runs no more.
func (j RedriveJob) Ended() bool { return j.State != RedriveRunning }

// redriveJobs are the jobs by id; mutated by the Raft goroutine only.
type redriveJobs struct {
	mu sync.RWMutex
	m  map[string]*RedriveJob // guarded by mu
}

// RedriveJob returns job id, or backend.ErrUnknownRedrive.
func (f *FSM) RedriveJob(id string) (RedriveJob, error) {
	f.redrives.mu.RLock()
	defer f.redrives.mu.RUnlock()
	j, ok := f.redrives.m[id]
	if !ok {
		return RedriveJob{}, fmt.Errorf("%w: %q", backend.ErrUnknownRedrive, id)
	}
	return j.clone(), nil
}

// RedriveJobs returns every kept job, in start order.
func (f *FSM) RedriveJobs() []RedriveJob {
	f.redrives.mu.RLock()
	out := make([]RedriveJob, 0, len(f.redrives.m))
	for _, j := range f.redrives.m {
		out = append(out, j.clone())
	}
	f.redrives.mu.RUnlock()
	slices.SortFunc(out, func(a, b RedriveJob) int { return compareRedriveIDs(a.ID, b.ID) })
	return out
}

// redriveID names the job started by the entry at index: unique, and the
// same on every replica.
func redriveID(index uint64) string { return "rd" + strconv.FormatUint(index, 10) }

// compareRedriveIDs orders ids by the index they were started at.
func compareRedriveIDs(a, b string) int {
	na, _ := strconv.ParseUint(strings.TrimPrefix(a, "rd"), 10, 64)
	nb, _ := strconv.ParseUint(strings.TrimPrefix(b, "rd"), 10, 64)
	if na != nb {
		if na < nb {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// ValidateRedriveSpec checks a spec against the topics: the dead-letter
// topic exists, with one end offset per partition; a target, if named,
// exists; the bounds and the rate make sense. Errors match
// backend.ErrInvalidArgument or backend.ErrUnknownTopic.
func (f *FSM) ValidateRedriveSpec(s RedriveSpec) error {
	t, err := f.Topic(s.DeadLetterTopic)
	if err != nil {
		return fmt.Errorf("redrive: dead-letter topic: %w", err)
	}
	if s.Target != "" {
		if _, err := f.Topic(s.Target); err != nil {
			return fmt.Errorf("redrive: target: %w", err)
		}
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: redrive: %s", backend.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) || s.Rate < 0:
		return bad("rate %v: want 0 (unbounded) or a positive number of records per second", s.Rate)
	case s.MaxRedrives < 1:
		return bad("max redrives %d: want at least 1", s.MaxRedrives)
	case s.SinceMs < 0 || s.UntilMs < 0 || s.UntilMs != 0 && s.UntilMs <= s.SinceMs:
		return bad("time range [%d, %d) ms is empty or negative", s.SinceMs, s.UntilMs)
	case s.FromOffset < 0 || s.ToOffset < 0 || s.ToOffset != 0 && s.ToOffset <= s.FromOffset:
		return bad("offset range [%d, %d) is empty or negative", s.FromOffset, s.ToOffset)
	case len(s.Ends) != len(t.Partitions):
		return bad("%d end offsets for %d partitions", len(s.Ends), len(t.Partitions))
	case len(s.Reasons) > 32:
		return bad("%d reasons, at most 32", len(s.Reasons))
	}
	for _, e := range s.Ends {
		if e < 0 {
			return bad("end offset %d", e)
		}
	}
	if len(s.Records) > MaxRedriveRecords {
		return bad("%d records named, at most %d", len(s.Records), MaxRedriveRecords)
	}
	for i, r := range s.Records {
		switch {
		case r.Partition < 0 || int(r.Partition) >= len(s.Ends):
			return bad("record %d/%d: no such partition", r.Partition, r.Offset)
		case r.Offset < 0 || r.Offset >= s.Ends[r.Partition]:
			return bad("record %d/%d: not below the end offset %d", r.Partition, r.Offset, s.Ends[r.Partition])
		case i > 0 && compareRedriveRecords(s.Records[i-1], r) >= 0:
			return bad("records not in (partition, offset) order without repeats at %d/%d", r.Partition, r.Offset)
		}
	}
	return nil
}

// redriveManifest is the jobs in a snapshot, in start order.
type redriveManifest struct {
	Jobs []RedriveJob `json:"jobs"`
}

func (f *FSM) snapshotRedrives() *redriveManifest {
	jobs := f.RedriveJobs()
	if len(jobs) == 0 {
		return nil
	}
	return &redriveManifest{Jobs: jobs}
}

func (f *FSM) restoreRedrives(m *redriveManifest) {
	jobs := map[string]*RedriveJob{}
	if m != nil {
		for i := range m.Jobs {
			j := m.Jobs[i].clone()
			jobs[j.ID] = &j
		}
	}
	f.redrives.mu.Lock()
	f.redrives.m = jobs
	f.redrives.mu.Unlock()
}
