package log

import "time"

// SetRollPolicy changes when the active segment rolls (Options.SegmentBytes
// and Options.SegmentMaxAge; zero keeps the current value) for the appends
// that follow. The replication layer calls it when a topic's segment.bytes or
// segment.ms changes, in Apply, so every replica rolls at the same batch.
func (l *Log) SetRollPolicy(segmentBytes int64, maxAge time.Duration) error {
	o := Options{SegmentBytes: segmentBytes, SegmentMaxAge: maxAge}
	if err := o.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if segmentBytes > 0 {
		l.opts.SegmentBytes = segmentBytes
	}
	if maxAge > 0 {
		l.opts.SegmentMaxAge = maxAge
	}
	return nil
}

// RollPolicy returns the current segment size and age limits.
func (l *Log) RollPolicy() (segmentBytes int64, maxAge time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opts.SegmentBytes, l.opts.SegmentMaxAge
}
