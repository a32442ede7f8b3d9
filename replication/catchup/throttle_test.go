package catchup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"testing"
	"time"
)

// The bounds below hold on any machine: pacing only ever delays, so each
// test asserts a least duration, never a greatest.

// TestThrottleReaderPaces: reading n bytes through a throttle of rate r
// and burst b takes at least (n - b) / r, whether one reader reads them or
// several share the throttle, and returns every byte unchanged; the
// throttle counts the bytes and the time its readers waited.
func TestThrottleReaderPaces(t *testing.T) {
	const rate = 1 << 20 // burst maxThrottleBurst (256 KiB)
	for _, tc := range []struct {
		name    string
		readers int
		each    int // bytes per reader
	}{
		{name: "one reader", readers: 1, each: 640 << 10},
		{name: "three readers share the budget", readers: 3, each: 224 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := NewThrottle(rate)
			total := tc.readers * tc.each
			minTime := time.Duration(float64(total-maxThrottleBurst) / rate * float64(time.Second))
			clocks := make([]waitCount, tc.readers)
			var wg sync.WaitGroup
			errs := make([]error, tc.readers)
			start := time.Now()
			for i := range tc.readers {
				wg.Go(func() {
					src := bytes.Repeat([]byte{byte(i + 1)}, tc.each)
					r := th.reader(context.Background(), bytes.NewReader(src), &clocks[i])
					got, err := io.ReadAll(r)
					if err == nil && !bytes.Equal(got, src) {
						err = errors.New("bytes changed on the way")
					}
					errs[i] = err
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("reader %d: %v", i, err)
				}
			}
			if elapsed < minTime {
				t.Errorf("%d bytes at %d B/s with a burst of %d took %v, want at least %v", total, rate, maxThrottleBurst, elapsed, minTime)
			}
			st := th.Stats()
			var sum time.Duration
			for i, c := range clocks {
				if c.started != c.ended {
					t.Errorf("reader %d: %d waits started, %d ended", i, c.started, c.ended)
				}
				sum += c.waited
			}
			// How much of the pacing is spent waiting depends on how fast
			// the readers run between waits: only the counts are exact.
			if st.Bytes != int64(total) || st.BytesPerSecond != rate || sum != st.ThrottleWait {
				t.Errorf("stats %+v, reported waits %v; want %d bytes, rate %d, the waits reported", st, sum, total, rate)
			}
		})
	}
}

// TestThrottleUnbounded: a throttle of no rate, and a nil one, pass bytes
// without waiting; the former still counts them.
func TestThrottleUnbounded(t *testing.T) {
	src := bytes.Repeat([]byte("x"), 4<<20)
	th := NewThrottle(0)
	var clock waitCount
	got, err := io.ReadAll(th.reader(context.Background(), bytes.NewReader(src), &clock))
	if err != nil || len(got) != len(src) || clock.started != 0 {
		t.Fatalf("%d bytes, %v, %d waits", len(got), err, clock.started)
	}
	if st := th.Stats(); st.Bytes != int64(len(src)) || st.ThrottleWait != 0 || st.BytesPerSecond != 0 {
		t.Errorf("stats %+v", st)
	}
	var none *Throttle
	r := bytes.NewReader(src)
	if none.reader(context.Background(), r, nil) != io.Reader(r) || none.Stats() != (NewThrottle(-1).Stats()) {
		t.Error("a nil throttle wraps or counts")
	}
}

// TestThrottleCancelEndsWait: a read waiting for the budget ends with its
// context's cause once the context ends, though the budget would keep it
// waiting for an hour; a read on an ended context does not start; the
// wait is counted, and the budget it reserved is given back.
func TestThrottleCancelEndsWait(t *testing.T) {
	const rate = 1 << 10 // burst 1 KiB
	th := NewThrottle(rate)
	// Others took an hour of the budget ahead of this reader.
	start := time.Now()
	const debt = rate * 3600
	for range 3600 {
		th.lim.ReserveN(start, rate)
	}
	cause := errors.New("node closing")
	ctx, cancel := context.WithCancelCause(context.Background())
	var clock waitCount
	read := make(chan struct{})
	r := th.reader(ctx, &signalReader{r: bytes.NewReader(make([]byte, 4<<10)), read: read, once: new(sync.Once)}, &clock)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 1<<10))
		done <- err
	}()
	// The reader has its KiB and pays for it next (or is paying): the
	// cause must end the wait, before it starts or while it lasts.
	<-read
	cancel(cause)
	select {
	case err := <-done:
		if !errors.Is(err, cause) {
			t.Fatalf("a read cut short: %v, want %v", err, cause)
		}
	case <-time.After(time.Minute):
		t.Fatal("a read waiting for the budget outlived its context by a minute (the budget holds it for an hour)")
	}
	if n, err := r.Read(make([]byte, 1<<10)); n != 0 || !errors.Is(err, cause) {
		t.Fatalf("a read after the end: %d, %v", n, err)
	}
	if st := th.Stats(); st.ThrottleWait != clock.waited || st.Bytes != 1<<10 || clock.started != 1 || clock.ended != 1 {
		t.Errorf("stats %+v, waits %+v; want the 1 KiB read and its one wait reported", st, clock)
	}
	// The bucket holds its burst less the hour, plus what refilled since
	// start: the reader's KiB is not kept.
	now := time.Now()
	want := float64(rate-debt) + rate*now.Sub(start).Seconds()
	if tok := th.lim.TokensAt(now); math.Abs(tok-want) > rate/2 {
		t.Errorf("%.0f tokens after the cancelled wait, want %.0f", tok, want)
	}
}

// signalReader closes read after its first read (of any reader sharing
// once).
type signalReader struct {
	r    io.Reader
	read chan struct{}
	once *sync.Once
}

func (s *signalReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.once.Do(func() { close(s.read) })
	return n, err
}

// waitCount is a waitClock that counts; one reader's at a time.
type waitCount struct {
	started, ended int
	waited         time.Duration
}

func (c *waitCount) waitStart()              { c.started++ }
func (c *waitCount) waitEnd(d time.Duration) { c.ended++; c.waited += d }
