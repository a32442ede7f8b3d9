package queue

// leaseState is where one tracked record stands. Records below a
// partition's Next that are not tracked are finished (acked, dead-lettered
// or skipped); records at or above Next are fresh (never delivered).
type leaseState uint8

const (
	// leaseReady: delivered before, available again now.
	leaseReady leaseState = iota
	// leaseInFlight: delivered, its lease live until Until.
	leaseInFlight
	// leaseDelayed: nacked transiently, available again at Until.
	leaseDelayed
	// leaseDeadPending: decided for the dead-letter topic, waiting for a
	// command with room to move it (see Group.PendingDeadLetters). It is
	// never delivered again.
	leaseDeadPending
	// leaseAcked and leaseDead are finished; the entry stays until the next
	// compaction.
	leaseAcked
	leaseDead
)

func (s leaseState) String() string {
	switch s {
	case leaseReady:
		return "ready"
	case leaseInFlight:
		return "in-flight"
	case leaseDelayed:
		return "delayed"
	case leaseDeadPending:
		return "dead-pending"
	case leaseAcked:
		return "acked"
	case leaseDead:
		return "dead-lettered"
	}
	return "unknown"
}

func (s leaseState) finished() bool { return s == leaseAcked || s == leaseDead }

// Dead-letter reasons, as written in the dead-letter record's reason header.
const (
	ReasonRejected         = "rejected"
	ReasonMaxDeliveries    = "max_deliveries"
	ReasonDeadlineExceeded = "deadline_exceeded"
	ReasonExpired          = "expired"
	// ReasonInvalidDeadline: the record's deadline header could not be
	// read (from feature level 6; before, it counted as no deadline).
	ReasonInvalidDeadline = "invalid_deadline"
)

// leaseRecord is one tracked record. Exported fields are its snapshot form.
type leaseRecord struct {
	Offset     int64      `json:"o"`
	State      leaseState `json:"s"`
	Deliveries uint32     `json:"d,omitempty"`
	// Until is the lease deadline (in flight) or the time the record is
	// available again (delayed), Unix ns.
	Until int64 `json:"u,omitempty"`
	// Tag is the current delivery's token tag.
	Tag uint64 `json:"t,omitempty"`
	// First and Last are the first and latest delivery times, Unix ns.
	First int64 `json:"f,omitempty"`
	Last  int64 `json:"l,omitempty"`
	// Reason is the dead-letter reason of a dead-pending record.
	Reason string `json:"r,omitempty"`
	// LastError is the error text of the latest nack (or lease expiry).
	LastError string `json:"e,omitempty"`
	// Worker is the worker id the current delivery's claim named, and
	// Extends how often its lease was extended.
	Worker  string `json:"w,omitempty"`
	Extends uint32 `json:"x,omitempty"`
	// Size is the record's size (RecordInfo.Size) while it is unfinished,
	// counted in its partition's LiveBytes; 0 unless the group counts
	// exact bytes.
	Size int64 `json:"z,omitempty"`
	// History holds the record's last attempts, HistoryDropped counts
	// older ones it forgot (history.go).
	History        []Attempt `json:"h,omitempty"`
	HistoryDropped uint32    `json:"hd,omitempty"`
}

// live reports whether a lease is current at now: a lease ends at exactly
// Until, so at Until the record is claimable again and the token stale.
func (r *leaseRecord) live(now int64) bool { return r.State == leaseInFlight && now < r.Until }

// recentFinished is how many finished deliveries a partition remembers after
// compaction, so a repeated ack of the same delivery is answered as a
// duplicate rather than as stale.
const recentFinished = 256

// finishedDelivery is a remembered finished delivery.
type finishedDelivery struct {
	Offset int64  `json:"o"`
	Tag    uint64 `json:"t"`
	Dead   bool   `json:"x,omitempty"`
}
