package redrive

import (
	"context"
	"log/slog"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// Node is what the redrive jobs need of the node they run on. Its methods
// may be called from any goroutine.
type Node interface {
	// Leads reports whether this node is the leader and has applied the
	// barrier of its term, so its state holds every job committed before:
	// only then does it run jobs.
	Leads() bool
	// Read returns whole stored batches of a partition from offset, at
	// least one and up to maxBytes in total, as backend.RecordAPI's Read:
	// an offset outside the log is a *backend.OutOfRangeError with the
	// log's bounds. The batches are the caller's.
	Read(topic string, partition int32, offset int64, maxBytes int) (backend.ReadResult, error)
	// Offsets returns a partition's bounds as its leader holds them (a
	// partition of a data group from the group's leader).
	Offsets(ctx context.Context, topic string, partition int32) (backend.Offsets, error)
	// Produce appends records in one Raft entry, as backend.RecordAPI's
	// Produce: a record whose idempotency key and payload are in the
	// topic's window is answered as a duplicate and not written again;
	// *backend.OverloadedError while admission control refuses.
	Produce(ctx context.Context, req backend.ProduceRequest) (backend.ProduceResult, error)
	// ProposeRedrive proposes a redrive command, stamped with the node's
	// clock, and returns the job as applied. Errors: a proposal's
	// (backend.ErrNotLeader, backend.ErrTimeout when the outcome is
	// unknown, backend.ErrStopped, backend.ErrShutdown,
	// *backend.FeatureLevelError) and the state machine's refusals.
	ProposeRedrive(ctx context.Context, c fsm.Redrive) (fsm.RedriveJob, error)
}

// State is the applied state the jobs read, as this node applied it;
// *fsm.FSM implements it.
type State interface {
	// Topic returns a topic, or backend.ErrUnknownTopic.
	Topic(name string) (*fsm.Topic, error)
	// ValidateRedriveSpec checks a job's definition against the topics
	// (fsm.FSM.ValidateRedriveSpec).
	ValidateRedriveSpec(s fsm.RedriveSpec) error
	// RedriveJob returns a job kept, or backend.ErrUnknownRedrive.
	RedriveJob(id string) (fsm.RedriveJob, error)
	// RedriveJobs returns the jobs kept, oldest first.
	RedriveJobs() []fsm.RedriveJob
	// ConsumerGroup returns a copy of a consumer group, or
	// group.ErrConsumerGroupNotFound.
	ConsumerGroup(name string) (*group.ConsumerGroup, error)
}

// Options configures a Runner.
type Options struct {
	// Logger receives the jobs' lines, each with its job's id; default
	// slog.Default().
	Logger *slog.Logger
}

// Runner starts, stops and runs the redrive jobs of one node. New starts
// nothing; Run is the leader's loop, until its context ends. Its methods
// may be called from any goroutine.
type Runner struct {
	node  Node
	state State
	log   *slog.Logger
	// wake wakes Run's loop early, after a start or a stop.
	wake chan struct{}
}

// New returns the runner of node's jobs; state is node's applied state.
func New(node Node, state State, opts Options) *Runner {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Runner{node: node, state: state, log: opts.Logger, wake: make(chan struct{}, 1)}
}
