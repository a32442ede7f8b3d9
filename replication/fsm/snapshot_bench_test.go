package fsm

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/log"
)

// benchFSM is an FSM over a temporary directory on the real file system
// with topic "b" of parts partitions, and the next Raft index to apply.
func benchFSM(b *testing.B, parts int32) (*FSM, uint64) {
	b.Helper()
	f := New(Config{Dir: filepath.Join(b.TempDir(), "topics"), Log: log.Options{Sync: log.SyncNone}, Logger: testLogger(), Fatal: func(err error) { b.Error(err) }})
	b.Cleanup(func() { f.Close() })
	d, err := encodeJSONCommand(CmdCreateTopic, 1, CreateTopic{Name: "b", Partitions: parts})
	if err != nil {
		b.Fatal(err)
	}
	if err, ok := f.applyOne(1, d).(error); ok {
		b.Fatal(err)
	}
	return f, 2
}

// BenchmarkSnapshotCapture measures FSM.Snapshot, the part of a snapshot
// that holds the FSM goroutine (Raft applies nothing meanwhile), against
// the number of partitions and of idempotency keys held.
func BenchmarkSnapshotCapture(b *testing.B) {
	for _, tc := range []struct {
		parts int32
		keyed bool
	}{{8, false}, {64, false}, {512, false}, {8, true}} {
		b.Run(fmt.Sprintf("partitions=%d/keyed=%v", tc.parts, tc.keyed), func(b *testing.B) {
			f, index := benchFSM(b, tc.parts)
			apps := benchAppends(b, 128, 1000, int(min(tc.parts, 8)), 128, tc.keyed)
			for _, a := range apps {
				if err, ok := f.applyOne(index, sealEntry(encodeAppend(1, a))).(error); ok {
					b.Fatal(err)
				}
				index++
			}
			for b.Loop() {
				s, err := f.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				s.Release()
			}
		})
	}
}

// BenchmarkApplyBesidePersist applies Append entries of 1000 128-byte
// records to 8 partitions while snapshots are persisted beside it, as Raft
// does (Snapshot on the applying goroutine, Persist on another, which
// fsyncs every partition log written since the last), and reports the
// slowest applies: an fsync that held a lock Apply needs shows there.
// With syncBytes > 0 a third goroutine syncs partitions with that many
// bytes unsynced (SyncDirty), as the node does.
func BenchmarkApplyBesidePersist(b *testing.B) {
	for _, syncBytes := range []int64{0, 4 << 20} {
		b.Run(fmt.Sprintf("syncDirty=%d", syncBytes), func(b *testing.B) {
			f, index := benchFSM(b, 8)
			apps := benchAppends(b, 64, 1000, 8, 128, false)
			data := make([][]byte, len(apps))
			for i, a := range apps {
				data[i] = sealEntry(encodeAppend(1, a))
			}
			stop := make(chan struct{})
			syncerDone := make(chan struct{})
			go func() {
				defer close(syncerDone)
				for syncBytes > 0 {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					if err := f.SyncDirty(syncBytes); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			var (
				lats      []time.Duration
				persisted = make(chan error, 1)
				pending   bool
				since     int
			)
			persisted <- nil
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				if err, ok := f.applyOne(index, data[i%len(data)]).(error); ok {
					b.Fatal(err)
				}
				lats = append(lats, time.Since(start))
				index++
				// A snapshot every 256 entries (about 32 MiB), once the
				// last one is persisted.
				if since++; since < 256 {
					continue
				}
				select {
				case err := <-persisted:
					if err != nil {
						b.Fatal(err)
					}
				default:
					continue
				}
				since, pending = 0, true
				s, err := f.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer s.Release()
					persisted <- s.Persist(discard{})
				}()
			}
			close(stop)
			<-syncerDone
			if pending {
				if err := <-persisted; err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(lats)
			b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-apply-ms")
			b.ReportMetric(float64(lats[len(lats)-1].Microseconds())/1000, "max-apply-ms")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
		})
	}
}
