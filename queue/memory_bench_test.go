package queue

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkInFlightRecordBytes measures the state a group holds per
// in-flight record — heap bytes and snapshot (JSON) bytes — without the
// state of feature level 6, with it and only the running attempt, and with
// a full history of MaxAttempts attempts with short and with capped error
// texts. Run with -bench InFlightRecordBytes -benchtime 1x; the figures
// are the custom metrics (the time per op is the setup's).
func BenchmarkInFlightRecordBytes(b *testing.B) {
	const records = 10_000
	for _, tc := range []struct {
		name     string
		exact    bool
		attempts int
		errBytes int
	}{
		{name: "level5", attempts: 1},
		{name: "level6-first-attempt", exact: true, attempts: 1},
		{name: "level6-10-attempts-32B-errors", exact: true, attempts: MaxAttempts, errBytes: 32},
		{name: "level6-10-attempts-1KiB-errors", exact: true, attempts: MaxAttempts, errBytes: MaxAttemptErrorBytes},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var heap, snap float64
			for range b.N {
				h, s := inFlightState(b, records, tc.exact, tc.attempts, tc.errBytes)
				heap, snap = h, s
			}
			b.ReportMetric(heap, "heap-B/in-flight")
			b.ReportMetric(snap, "snapshot-B/in-flight")
		})
	}
}

// inFlightState builds a group with n records in flight, each on its
// attempts-th delivery after attempts-1 transient nacks with errBytes of
// error text, and returns its heap and snapshot bytes per record.
func inFlightState(b *testing.B, n int, exact bool, attempts, errBytes int) (heapPer, snapPer float64) {
	b.Helper()
	src := &fakeSource{recs: map[int32]map[int64]RecordInfo{0: {}}, ends: []int64{int64(n)}}
	for off := range int64(n) {
		src.recs[0][off] = RecordInfo{Exists: true, Size: 100}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	q, err := New("jobs", "workers", Config{MaxInFlight: MaxInFlightLimit, MaxDeliveries: MaxDeliveriesLimit, Lease: time.Hour}, []int64{0}, []byte("0123456789abcdef"), 1, 0)
	if err != nil {
		b.Fatal(err)
	}
	if exact {
		if err := q.SetExactBytes(src, src.ends, 0); err != nil {
			b.Fatal(err)
		}
	}
	errText := strings.Repeat("e", errBytes)
	now := int64(time.Second)
	for a := 1; a <= attempts; a++ {
		res, err := q.Claim(ClaimRequest{Now: now, Index: uint64(a), Max: n, Ends: src.ends, Worker: fmt.Sprintf("worker-%d/%d", a, 4242)}, src)
		if err != nil || len(res.Deliveries) != n {
			b.Fatalf("claim %d: %d deliveries, %v", a, len(res.Deliveries), err)
		}
		if a == attempts {
			break
		}
		nacks := make([]Nack, n)
		for i, d := range res.Deliveries {
			// Each nack's text is its own, as when decoded from a command.
			nacks[i] = Nack{Token: d.Token, HasDelay: true, Error: strings.Clone(errText)}
		}
		q.Nack(now, nacks)
		now += int64(time.Second)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	js, err := json.Marshal(q.Snapshot())
	if err != nil {
		b.Fatal(err)
	}
	runtime.KeepAlive(q)
	return heap, float64(len(js)) / float64(n)
}

// BenchmarkClaimAckCycle measures a claim of 500 records and their ack,
// without the state of feature level 6 and with it (sizes, append marks
// and an attempt per delivery), per record.
func BenchmarkClaimAckCycle(b *testing.B) {
	for _, exact := range []bool{false, true} {
		name := "level5"
		if exact {
			name = "level6"
		}
		b.Run(name, func(b *testing.B) {
			const batch = 500
			n := b.N * batch
			src := &fakeSource{recs: map[int32]map[int64]RecordInfo{0: {}}, ends: []int64{int64(n)}}
			for off := range int64(n) {
				src.recs[0][off] = RecordInfo{Exists: true, Size: 100}
			}
			q, err := New("jobs", "workers", Config{MaxInFlight: MaxInFlightLimit}, []int64{0}, []byte("0123456789abcdef"), 1, 0)
			if err != nil {
				b.Fatal(err)
			}
			if exact {
				if err := q.SetExactBytes(src, src.ends, 0); err != nil {
					b.Fatal(err)
				}
			}
			toks := make([]Token, 0, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				now := int64(i+1) * int64(time.Millisecond)
				res, err := q.Claim(ClaimRequest{Now: now, Index: uint64(i + 2), Max: batch, Ends: src.ends, Worker: "host/42"}, src)
				if err != nil || len(res.Deliveries) != batch {
					b.Fatalf("claim: %d, %v", len(res.Deliveries), err)
				}
				toks = toks[:0]
				for _, d := range res.Deliveries {
					toks = append(toks, d.Token)
				}
				q.Ack(now, toks)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
		})
	}
}
