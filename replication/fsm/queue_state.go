package fsm

import (
	"fmt"
	"sort"
	"sync"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/queue"
)

// queueGroups holds every queue group's lease state. The Raft goroutine
// mutates it under mu; readers (describe, the server's claim wait) take the
// read lock. The zero value is empty and ready.
//
// Lock order: queueGroups.mu before FSM.mu.
type queueGroups struct {
	mu sync.RWMutex
	// byTopic maps topic -> group name -> state; guarded by mu.
	byTopic map[string]map[string]*queue.Group
	// windows caches decoded record windows per topic incarnation and
	// partition for claims; only the Raft goroutine uses it (under mu).
	windows map[*Topic]map[int32][]batch.Record

	notifyMu sync.Mutex
	// returned maps a topic and group to the channel closed (and
	// dropped) when a command offers the group's leased records again;
	// guarded by notifyMu. The first waiter makes an entry and the signal
	// drops it: at most one per queue group waited on.
	returned map[[2]string]chan struct{}
}

// QueueReturned returns a channel that is closed at the next command that
// offers leased records of queue group name on topic again (a nack, a
// release), for long polls: a claim waiting for records wakes on appends
// and lease ends, and those records are neither.
func (f *FSM) QueueReturned(topic, name string) <-chan struct{} {
	qs := &f.queues
	qs.notifyMu.Lock()
	defer qs.notifyMu.Unlock()
	if qs.returned == nil {
		qs.returned = map[[2]string]chan struct{}{}
	}
	k := [2]string{topic, name}
	ch := qs.returned[k]
	if ch == nil {
		ch = make(chan struct{})
		qs.returned[k] = ch
	}
	return ch
}

// signalReturned wakes the waiters of QueueReturned(topic, name).
func (qs *queueGroups) signalReturned(topic, name string) {
	qs.notifyMu.Lock()
	defer qs.notifyMu.Unlock()
	k := [2]string{topic, name}
	if ch := qs.returned[k]; ch != nil {
		close(ch)
		delete(qs.returned, k)
	}
}

// windowsLocked returns the claim window cache of a topic.
func (qs *queueGroups) windowsLocked(t *Topic) map[int32][]batch.Record {
	if qs.windows == nil {
		qs.windows = map[*Topic]map[int32][]batch.Record{}
	}
	w := qs.windows[t]
	if w == nil {
		w = map[int32][]batch.Record{}
		qs.windows[t] = w
	}
	return w
}

func (qs *queueGroups) getLocked(topic, name string) (*queue.Group, error) {
	q := qs.byTopic[topic][name]
	if q == nil {
		return nil, fmt.Errorf("%w: %s on topic %s", queue.ErrGroupNotFound, name, topic)
	}
	return q, nil
}

func (qs *queueGroups) putLocked(q *queue.Group) {
	if qs.byTopic == nil {
		qs.byTopic = map[string]map[string]*queue.Group{}
	}
	m := qs.byTopic[q.Topic()]
	if m == nil {
		m = map[string]*queue.Group{}
		qs.byTopic[q.Topic()] = m
	}
	m[q.Name()] = q
}

// dropTopic forgets the queue groups of a deleted topic.
func (qs *queueGroups) dropTopic(topic string) {
	qs.mu.Lock()
	delete(qs.byTopic, topic)
	for t := range qs.windows {
		if t.Name == topic {
			delete(qs.windows, t)
		}
	}
	qs.mu.Unlock()
}

// sortedLocked returns every group, by topic then name (snapshots must not
// depend on map order).
func (qs *queueGroups) sortedLocked() []*queue.Group {
	var out []*queue.Group
	for _, m := range qs.byTopic {
		for _, q := range m {
			out = append(out, q)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic() != out[j].Topic() {
			return out[i].Topic() < out[j].Topic()
		}
		return out[i].Name() < out[j].Name()
	})
	return out
}

// DescribeQueueGroup describes a group at now (for display: lazy expiry is
// counted, not applied).
func (f *FSM) DescribeQueueGroup(topic, name string, now int64) (backend.QueueGroupInfo, error) {
	f.queues.mu.RLock()
	defer f.queues.mu.RUnlock()
	q, err := f.queues.getLocked(topic, name)
	if err != nil {
		return backend.QueueGroupInfo{}, err
	}
	t, err := f.Topic(topic)
	if err != nil {
		return backend.QueueGroupInfo{}, err
	}
	ends := queueReadEnds(t)
	info := backend.QueueGroupInfo{Topic: topic, Group: name, Config: q.Config(), CreatedAt: q.CreatedAt(), Paused: q.Paused(),
		Backlog: q.Backlog(ends), ExactBytes: q.ExactBytes(), MaxBacklogAgeMs: configInt(t.Config, ConfigQueueMaxBacklogAgeMs)}
	info.DrainPerSec, _ = q.DrainRate(now)
	info.OldestAppend, _ = q.OldestAppend(ends)
	src := f.newQueueSource(t, q.Config().DeadlineHeader, nil)
	for _, st := range q.Stats(now, ends) {
		pi := backend.QueuePartitionInfo{PartitionStats: st}
		if st.OldestReady >= 0 {
			if ri, err := src.RecordInfo(st.Partition, st.OldestReady); err == nil && ri.Exists {
				pi.OldestReadyTimestamp = ri.Timestamp
			}
		}
		info.Partitions = append(info.Partitions, pi)
	}
	return info, nil
}

// QueueInFlight lists a group's records under a live lease at now, at most
// limit of them (limit <= 0: all), and whether the list was cut.
func (f *FSM) QueueInFlight(topic, name string, now int64, limit int) ([]queue.InFlightRecord, bool, error) {
	f.queues.mu.RLock()
	defer f.queues.mu.RUnlock()
	q, err := f.queues.getLocked(topic, name)
	if err != nil {
		return nil, false, err
	}
	recs, more := q.InFlight(now, limit)
	return recs, more, nil
}

// QueueGroups lists the names of a topic's queue groups, sorted.
func (f *FSM) QueueGroups(topic string) []string {
	f.queues.mu.RLock()
	defer f.queues.mu.RUnlock()
	var out []string
	for name := range f.queues.byTopic[topic] {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// QueueGroupNamed reports whether a queue group of that name exists on
// any topic (a Kafka share group is the queue groups of its name).
func (f *FSM) QueueGroupNamed(name string) bool {
	f.queues.mu.RLock()
	defer f.queues.mu.RUnlock()
	for _, gs := range f.queues.byTopic {
		if _, ok := gs[name]; ok {
			return true
		}
	}
	return false
}

// QueueClaimable reports whether a claim at now could deliver anything, or
// else the earliest time one could without new records; a server long-poll
// waits for that time or a new append instead of proposing empty claims.
func (f *FSM) QueueClaimable(topic, name string, now int64) (bool, int64, error) {
	f.queues.mu.RLock()
	defer f.queues.mu.RUnlock()
	q, err := f.queues.getLocked(topic, name)
	if err != nil {
		return false, 0, err
	}
	t, err := f.Topic(topic)
	if err != nil {
		return false, 0, err
	}
	ok, wake := q.Claimable(now, queueReadEnds(t))
	return ok, wake, nil
}

// queueEnds returns the state machine's end offset of every partition: the
// offsets as of the command being applied, also during a replay when the
// logs already hold more.
func queueEnds(t *Topic) []int64 {
	ends := make([]int64, len(t.Partitions))
	for i, p := range t.Partitions {
		if p != nil { // another data group's partition ends at 0 here
			ends[i] = p.next
		}
	}
	return ends
}

// queueReadEnds returns the partitions' end offsets for readers outside the
// Raft goroutine (which must not touch Partition.next).
func queueReadEnds(t *Topic) []int64 {
	ends := make([]int64, len(t.Partitions))
	for i, p := range t.Partitions {
		if p != nil {
			ends[i] = p.log.EndOffset()
		}
	}
	return ends
}
