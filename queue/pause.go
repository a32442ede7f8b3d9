package queue

// Pause and resume: a paused group delivers nothing, for a downstream
// outage, while leases already given keep running (acks, nacks and extends
// still work) and every count is kept. Expired leases are settled lazily by
// the first claim after resume.

// SetPaused pauses (true) or resumes (false) the group and reports whether
// that changed anything.
func (q *Group) SetPaused(paused bool) bool {
	if q.paused == paused {
		return false
	}
	q.paused = paused
	return true
}

// Paused reports whether the group is paused.
func (q *Group) Paused() bool { return q.paused }
