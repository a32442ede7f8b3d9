package queue

import (
	"testing"
	"time"
)

func TestBackoffBounds(t *testing.T) {
	tests := []struct {
		name      string
		base, max time.Duration
		delivery  uint32
		ceiling   time.Duration
	}{
		{name: "first delivery", base: time.Second, max: time.Minute, delivery: 1, ceiling: time.Second},
		{name: "doubles", base: time.Second, max: time.Minute, delivery: 3, ceiling: 4 * time.Second},
		{name: "capped", base: time.Second, max: 5 * time.Second, delivery: 4, ceiling: 5 * time.Second},
		{name: "huge delivery count does not overflow", base: time.Second, max: time.Hour, delivery: 1000, ceiling: time.Hour},
		{name: "zero base means no delay", base: 0, max: time.Hour, delivery: 2, ceiling: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lo, hi time.Duration = tt.ceiling, 0
			for off := int64(0); off < 2000; off++ {
				d := backoff(tt.base, tt.max, 42, 3, off, tt.delivery)
				if d < 0 || d > tt.ceiling {
					t.Fatalf("offset %d: backoff %v outside [0, %v]", off, d, tt.ceiling)
				}
				if again := backoff(tt.base, tt.max, 42, 3, off, tt.delivery); again != d {
					t.Fatalf("offset %d: not deterministic: %v then %v", off, d, again)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			// Full jitter: 2000 draws cover most of [0, ceiling].
			if tt.ceiling > 0 && (lo > tt.ceiling/10 || hi < tt.ceiling*9/10) {
				t.Errorf("draws span [%v, %v], want most of [0, %v]", lo, hi, tt.ceiling)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name         string
		excess, rate float64
		want         time.Duration
	}{
		{name: "excess over the rate", excess: 50, rate: 10, want: 5 * time.Second},
		{name: "floor", excess: 1, rate: 1000, want: MinRetryAfter},
		{name: "ceiling", excess: 1e6, rate: 1, want: MaxRetryAfter},
		{name: "nothing drains", excess: 1, rate: 0, want: IdleRetryAfter},
		{name: "no excess", excess: 0, rate: 3, want: MinRetryAfter},
	} {
		if got := RetryAfter(tc.excess, tc.rate); got != tc.want {
			t.Errorf("%s: RetryAfter(%v, %v) = %v, want %v", tc.name, tc.excess, tc.rate, got, tc.want)
		}
	}
}
