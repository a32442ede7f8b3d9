package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

// Producers are concurrent producers of unique values through the Go
// client (which follows the leader and retries only what was surely not
// written); they record every value attempted and every acknowledgement.
type Producers struct {
	PerCall    int          // records per produce call
	Lat        *Latencies   // when set, the latency of each acknowledged call
	HTTPClient *http.Client // when set, the clients' HTTP client (TLS, say)

	// Guarded by mu while producers run; read them directly once every
	// Run returned, or through Results before.
	mu            sync.Mutex
	Acks          []Ack           // every acknowledged record
	Attempted     map[string]bool // every value sent, acknowledged or not
	Calls, Failed int             // produce calls, and those that failed
	// failures counts the failed calls by their reason (client.ReasonOf;
	// "unknown outcome" and "other" besides), with the first error of
	// each (FailureKinds).
	failures map[string]*failureKind
}

type failureKind struct {
	n     int
	first error
}

// NewProducers returns producers that send perCall records per call.
func NewProducers(perCall int) *Producers {
	return &Producers{PerCall: perCall, Attempted: map[string]bool{}}
}

// Run is producer id: it writes through the node at seed until stop is
// closed. A failed call (refused or unknown) is never counted as lost.
func (ps *Producers) Run(ctx context.Context, t testing.TB, seed, topic string, id int, stop <-chan struct{}) {
	c, err := client.New(seed, client.Options{HTTPClient: ps.HTTPClient, Timeout: 3 * time.Second,
		Retry: client.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}})
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		recs := make([]client.Record, ps.PerCall)
		ps.mu.Lock()
		for j := range recs {
			v := fmt.Sprintf("c%d-%d-%d", id, n, j)
			ps.Attempted[v] = true
			// Keys spread the calls of single-record producers too.
			recs[j] = client.Record{Key: []byte(fmt.Sprintf("k%d", id+j)), Value: []byte(v)}
		}
		ps.mu.Unlock()
		start := time.Now()
		res, err := c.Produce(ctx, topic, recs)
		if err == nil && ps.Lat != nil {
			ps.Lat.Add(time.Since(start))
		}
		ps.mu.Lock()
		ps.Calls++
		if err == nil {
			for i, r := range res {
				ps.Acks = append(ps.Acks, Ack{r.Partition, r.Offset, string(recs[i].Value)})
			}
		} else {
			ps.Failed++
			ps.noteFailure(err)
		}
		ps.mu.Unlock()
		if err != nil {
			// Back off while the cluster is down.
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// noteFailure counts err by its kind; ps.mu is held.
func (ps *Producers) noteFailure(err error) {
	kind := client.ReasonOf(err)
	switch {
	case kind != "":
	case errors.Is(err, client.ErrOutcomeUnknown):
		kind = "unknown outcome"
	default:
		kind = "other"
	}
	if ps.failures == nil {
		ps.failures = map[string]*failureKind{}
	}
	f := ps.failures[kind]
	if f == nil {
		f = &failureKind{first: err}
		ps.failures[kind] = f
	}
	f.n++
}

// FailureKinds describes the failed calls by kind, each with its count
// and first error ("none" when none failed).
func (ps *Producers) FailureKinds() string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.failures) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(ps.failures)) {
		f := ps.failures[k]
		fmt.Fprintf(&b, "%s %d (first: %v); ", k, f.n, f.first)
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// AddAttempt records a value the test sent itself, beside the producers.
func (ps *Producers) AddAttempt(v string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.Attempted[v] = true
}

// AddAck records an acknowledgement of a value the test sent itself.
func (ps *Producers) AddAck(a Ack) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.Acks = append(ps.Acks, a)
}

// CallCount returns how many produce calls ended, acknowledged or not.
func (ps *Producers) CallCount() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.Calls
}

// AckCount returns how many records were acknowledged so far.
func (ps *Producers) AckCount() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.Acks)
}

// Results returns copies of the acknowledgements and attempts so far, and
// the call counts, while producers may still run.
func (ps *Producers) Results() (acks []Ack, attempted map[string]bool, calls, failed int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Clone(ps.Acks), maps.Clone(ps.Attempted), ps.Calls, ps.Failed
}

// WaitAcks waits until n more records than now are acknowledged.
func (ps *Producers) WaitAcks(t testing.TB, ctx context.Context, what string, n int) {
	t.Helper()
	target := ps.AckCount() + n
	WaitFor(t, ctx, what, func() bool { return ps.AckCount() >= target })
}

// Latencies records how long acknowledged produce calls took.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one call's latency.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
}

// Take returns the calls recorded since the last take, sorted.
func (l *Latencies) Take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.d
	l.d = nil
	slices.Sort(out)
	return out
}
