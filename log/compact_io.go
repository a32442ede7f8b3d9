package log

import "time"

// Bounded compaction I/O.
//
// Preparing a compaction reads every source segment twice and writes the
// output. Done at full speed, the output sits in the page cache until one
// fsync flushes tens of megabytes at once, and every other fsync on the disk
// (the Raft log's, which each produce waits for) queues behind that flush,
// turning produce latencies of milliseconds into seconds. So the
// preparation
//
//   - syncs its output every CompactOptions.SyncBytes written (fdatasync of
//     the file being written), so at most that much is ever waiting to be
//     flushed and another fsync waits behind a small flush, not a huge one;
//   - spends at most CompactOptions.IOBytesPerSec of reads plus writes (as
//     Kafka's log.cleaner.io.max.bytes.per.second), sleeping when ahead of
//     the budget, which also bounds the CPU it takes from appends.

// DefaultCompactSyncBytes is CompactOptions.SyncBytes when it is zero.
const DefaultCompactSyncBytes = 4 << 20

// ioBudget paces a compaction's I/O at rate bytes per second. A nil
// *ioBudget does not pace.
type ioBudget struct {
	rate  float64 // bytes per second
	now   func() time.Time
	sleep func(time.Duration)
	start time.Time // when the current accounting window began
	spent int64     // bytes done since start
}

// maxBudgetCredit is how far behind its budget a compaction may fall (a slow
// read, a long GC) and then catch up at full speed: beyond it the window
// restarts, so idle time does not bank a burst.
const maxBudgetCredit = time.Second

func newIOBudget(bytesPerSec int64, now func() time.Time, sleep func(time.Duration)) *ioBudget {
	if bytesPerSec <= 0 {
		return nil
	}
	return &ioBudget{rate: float64(bytesPerSec), now: now, sleep: sleep, start: now()}
}

// spend accounts n bytes of I/O and sleeps until the budget allows them.
func (b *ioBudget) spend(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.spent += int64(n)
	due := b.start.Add(time.Duration(float64(b.spent) / b.rate * float64(time.Second)))
	now := b.now()
	switch d := due.Sub(now); {
	case d > 0:
		b.sleep(d)
	case -d > maxBudgetCredit:
		b.start, b.spent = now, 0
	}
}
