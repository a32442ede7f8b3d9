package log

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// SyncPolicy says when appended bytes are made durable (fdatasync).
type SyncPolicy int

const (
	// SyncEveryAppend syncs the data file before Append returns. The default.
	SyncEveryAppend SyncPolicy = iota
	// SyncInterval syncs on an Append that finds Options.SyncInterval has
	// passed since the last sync (no background goroutine), and on Close.
	SyncInterval
	// SyncNone never syncs on Append; the caller calls Sync (the replication
	// layer does, before a snapshot). Roll and Close still sync.
	SyncNone
)

// Defaults applied to zero Options fields.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMaxAge      = 7 * 24 * time.Hour
	DefaultMaxBatchBytes      = 8<<20 + headerSize
	DefaultIndexIntervalBytes = 4096
	DefaultSyncInterval       = time.Second

	// maxSegmentBytes bounds SegmentBytes: index positions are uint32.
	maxSegmentBytes = math.MaxUint32
	// maxMaxBatchBytes bounds MaxBatchBytes (a batch is read whole into memory).
	maxMaxBatchBytes = 1 << 30
)

// Options configure a Log. The zero value is valid: every zero field takes
// its documented default.
type Options struct {
	// SegmentBytes rolls the active segment before an append would make it
	// exceed this many bytes (a single larger batch gets a segment of its
	// own). Default 1 GiB; at most 4 GiB-1 (index positions are uint32).
	SegmentBytes int64
	// SegmentMaxAge rolls the active segment on an append whose time
	// (AppendMeta.Time, else Now) is this much later than the segment's
	// creation time, which is the time of the append or Roll that created it
	// and is stored in its .meta file. Default 7 days.
	SegmentMaxAge time.Duration
	// MaxBatchBytes is the largest batch Append accepts. Default 8 MiB + 61;
	// at most 1 GiB.
	MaxBatchBytes int
	// IndexIntervalBytes is the number of data bytes between sparse index
	// entries. Default 4096. Each entry costs 20 bytes of memory (8 offset
	// index + 12 time index), so index memory is about 20/IndexIntervalBytes
	// of the data size (0.5% by default).
	IndexIntervalBytes int
	// Sync is the durability policy of Append. Default SyncEveryAppend.
	Sync SyncPolicy
	// SyncInterval is the period of SyncInterval. Default 1s.
	SyncInterval time.Duration
	// FS is the file system. Default: the operating system's.
	FS FS
	// Now is the clock, used only when AppendMeta.Time is zero and for
	// SyncInterval. Default time.Now.
	Now func() time.Time
}

// Validate reports whether o is usable. Zero fields are valid (defaults).
func (o Options) Validate() error {
	var errs []error
	if o.SegmentBytes < 0 || o.SegmentBytes > maxSegmentBytes {
		errs = append(errs, fmt.Errorf("SegmentBytes %d not in [0, %d]", o.SegmentBytes, int64(maxSegmentBytes)))
	}
	if o.SegmentMaxAge < 0 {
		errs = append(errs, fmt.Errorf("SegmentMaxAge %v is negative", o.SegmentMaxAge))
	}
	if o.MaxBatchBytes != 0 && (o.MaxBatchBytes < headerSize || o.MaxBatchBytes > maxMaxBatchBytes) {
		errs = append(errs, fmt.Errorf("MaxBatchBytes %d not in [%d, %d]", o.MaxBatchBytes, headerSize, maxMaxBatchBytes))
	}
	if o.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("IndexIntervalBytes %d is negative", o.IndexIntervalBytes))
	}
	if o.Sync < SyncEveryAppend || o.Sync > SyncNone {
		errs = append(errs, fmt.Errorf("unknown SyncPolicy %d", o.Sync))
	}
	if o.SyncInterval < 0 {
		errs = append(errs, fmt.Errorf("SyncInterval %v is negative", o.SyncInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("log: invalid options: %w", err)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentMaxAge == 0 {
		o.SegmentMaxAge = DefaultSegmentMaxAge
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
