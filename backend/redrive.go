package backend

// DefaultMaxRedrives is RedriveSpec.MaxRedrives when zero.
const DefaultMaxRedrives = 3

// Redrive job states (RedriveJob.State).
const (
	RedriveRunning = "running"
	RedriveStopped = "stopped"
	RedriveDone    = "done"
	RedriveFailed  = "failed"
)

// RedriveSpec is what a redrive job does; it does not change once started.
type RedriveSpec struct {
	// DeadLetterTopic is read; Target, when set, receives every record,
	// routed by key; when empty each record goes back to its origin topic
	// and partition (its logd-dlq-origin-* headers).
	DeadLetterTopic string
	Target          string
	// Reasons: any of these (empty: any). Key: the record key equals it
	// (when HasKey).
	Reasons []string
	Key     string
	HasKey  bool
	// SinceMs and UntilMs bound the dead-lettering time, [Since, Until)
	// in Unix milliseconds; 0 is unbounded.
	SinceMs int64
	UntilMs int64
	// FromOffset and ToOffset bound the dead-letter offsets of every
	// partition, [From, To); ToOffset 0 is unbounded.
	FromOffset int64
	ToOffset   int64
	// Rate bounds the records redriven per second; 0 is unbounded.
	Rate float64
	// MaxRedrives is the loop guard: a record redriven this many times
	// already is refused (counted, left where it is); 0 is
	// DefaultMaxRedrives.
	MaxRedrives int
	// Records, when set, names the dead letters the job may move; the
	// filters above still apply to them. Empty: every dead letter the
	// filters select.
	Records []RedriveRecord
	// Ends and Principal are set by the backend when the job starts, and
	// ignored in a start: the dead-letter topic's end offsets then, one
	// per partition (the job is done when its position reaches them), and
	// who started the job (empty without authentication).
	Ends      []int64
	Principal string
}

// RedriveRecord names one dead letter of a job's dead-letter topic.
type RedriveRecord struct {
	Partition int32
	Offset    int64
}

// RedriveProgress counts what a job did. Scanned counts dead-letter
// records read; each is then redriven, a duplicate (an earlier attempt of
// the same batch, or an earlier job, wrote it: the idempotency key
// matched), refused by the loop guard, or skipped by the filter.
type RedriveProgress struct {
	Scanned    int64
	Redriven   int64
	Duplicates int64
	Refused    int64
	Skipped    int64
	// Bytes of keys and values redriven.
	Bytes int64
}

// RedriveJob is a redrive job as replicated, a copy the caller owns.
type RedriveJob struct {
	ID       string
	Spec     RedriveSpec
	State    string
	Error    string
	Progress RedriveProgress
	// CreatedNanos and UpdatedNanos are command times.
	CreatedNanos int64
	UpdatedNanos int64
}

// Ended reports whether the job runs no more.
func (j RedriveJob) Ended() bool { return j.State != RedriveRunning }

// Headers a redrive job adds to a redriven record (the client library
// reads the same names): how often the record was redriven, and the
// idempotency key the record had when it was dead-lettered.
const (
	RedriveHeaderCount = "logd-redrive-count"
	RedriveHeaderKey   = "logd-redrive-idempotency-key"
)
