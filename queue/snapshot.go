package queue

import (
	"fmt"
	"slices"
)

// Snapshot is a queue group's whole state in a form that encodes to
// JSON; Restore rebuilds the group from it exactly.
type Snapshot struct {
	Topic       string `json:"topic"`
	Name        string `json:"name"`
	Config      Config `json:"config"`
	Secret      []byte `json:"secret"`
	CreateIndex uint64 `json:"create_index"`
	CreatedAt   int64  `json:"created_at"`
	Cursor      int    `json:"cursor"`
	Paused      bool   `json:"paused,omitempty"`
	// ExactBytes: the partitions count exact backlog bytes (absent from
	// snapshots of builds before them).
	ExactBytes bool `json:"exact_bytes,omitempty"`
	// FinishedBytes and Drain are the drain rate's counts and samples
	// (drain.go; absent from snapshots of builds before them).
	FinishedBytes int64             `json:"finished_bytes,omitempty"`
	Drain         []drainSample     `json:"drain,omitempty"`
	Partitions    []*partitionState `json:"partitions"`
}

// Snapshot returns a deep copy of the state, safe to encode while the
// queue keeps changing.
func (q *Group) Snapshot() Snapshot {
	s := Snapshot{Topic: q.topic, Name: q.name, Config: q.cfg, Secret: slices.Clone(q.secret),
		CreateIndex: q.createIndex, CreatedAt: q.createdAt, Cursor: q.cursor, Paused: q.paused, ExactBytes: q.exact,
		FinishedBytes: q.finishedBytes, Drain: slices.Clone(q.drain)}
	for _, p := range q.parts {
		c := *p
		c.Tracked = make([]*leaseRecord, len(p.Tracked))
		for i, r := range p.Tracked {
			rc := *r
			rc.History = slices.Clone(r.History)
			c.Tracked[i] = &rc
		}
		c.Recent = slices.Clone(p.Recent)
		c.Appended = slices.Clone(p.Appended)
		s.Partitions = append(s.Partitions, &c)
	}
	return s
}

// Restore rebuilds a queue from a snapshot, checking its invariants so
// a damaged snapshot is refused rather than served.
func Restore(s Snapshot) (*Group, error) {
	if err := s.Config.Validate(); err != nil {
		return nil, fmt.Errorf("restore queue group %s/%s: %w", s.Topic, s.Name, err)
	}
	q := &Group{topic: s.Topic, name: s.Name, cfg: s.Config, secret: slices.Clone(s.Secret), seed: backoffSeed(s.Secret),
		createIndex: s.CreateIndex, createdAt: s.CreatedAt, cursor: s.Cursor, paused: s.Paused, exact: s.ExactBytes,
		finishedBytes: s.FinishedBytes, drain: slices.Clone(s.Drain)}
	if len(q.drain) > drainSamples {
		return nil, fmt.Errorf("restore queue group %s/%s: %d drain samples, at most %d", s.Topic, s.Name, len(q.drain), drainSamples)
	}
	for i, p := range s.Partitions {
		if p == nil {
			return nil, fmt.Errorf("restore queue group %s/%s: partition %d missing", s.Topic, s.Name, i)
		}
		live, pending := 0, 0
		var liveBytes int64
		prev := p.Start - 1
		for _, r := range p.Tracked {
			if r == nil || r.Offset <= prev || r.Offset >= p.Next {
				return nil, fmt.Errorf("restore queue group %s/%s: partition %d: tracked offsets out of order or range", s.Topic, s.Name, i)
			}
			prev = r.Offset
			if !r.State.finished() {
				live++
				liveBytes += r.Size
			}
			if len(r.History) > MaxAttempts {
				return nil, fmt.Errorf("restore queue group %s/%s: partition %d: %d attempts at offset %d, at most %d", s.Topic, s.Name, i, len(r.History), r.Offset, MaxAttempts)
			}
			for _, a := range r.History {
				q.historyBytes += int64(len(a.Error))
			}
			if r.State == leaseDeadPending {
				pending++
			}
		}
		if live != p.Live || pending != p.DeadPending || p.Start > p.Next || liveBytes != p.LiveBytes || p.FreshBytes < 0 {
			return nil, fmt.Errorf("restore queue group %s/%s: partition %d: counts do not match its records", s.Topic, s.Name, i)
		}
		if len(p.Appended) > maxAppendMarks {
			return nil, fmt.Errorf("restore queue group %s/%s: partition %d: %d append marks, at most %d", s.Topic, s.Name, i, len(p.Appended), maxAppendMarks)
		}
		c := *p
		q.parts = append(q.parts, &c)
	}
	if len(q.parts) > 0 && (q.cursor < 0 || q.cursor >= len(q.parts)) {
		q.cursor = 0
	}
	return q, nil
}
