package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// Defaults of WorkerOptions.
const (
	DefaultWorkerMaxWait         = 5 * time.Second
	DefaultWorkerAckBatch        = 1000
	DefaultWorkerAckers          = 2
	DefaultWorkerShutdownTimeout = 5 * time.Second
)

// WorkerOptions configure a Worker. Zero fields take their defaults.
type WorkerOptions struct {
	Topic string
	Group string
	// Concurrency bounds the handlers running at once; default 1.
	Concurrency int
	// MaxClaim bounds the records of one claim; default Concurrency. A
	// claim asks only for as many records as there are free handlers.
	MaxClaim int
	// Lease of each delivery; 0 means the group's. While a handler runs,
	// the worker extends its lease each time half of it has passed.
	Lease time.Duration
	// MaxWait is each claim's long-poll wait; default DefaultWorkerMaxWait.
	MaxWait time.Duration
	// AckBatch bounds the tokens of one ack call (acks of finished jobs
	// are batched); default DefaultWorkerAckBatch.
	AckBatch int
	// Ackers is how many ack calls may be in flight; default
	// DefaultWorkerAckers.
	Ackers int
	// ShutdownTimeout bounds the acks and nacks sent after Run's context
	// ends; default DefaultWorkerShutdownTimeout.
	ShutdownTimeout time.Duration
	// OnError, if set, receives failures the worker survives (a failed
	// claim, ack or nack, a lost lease), from any goroutine.
	OnError func(error)
	// Clock times lease extensions and the pause after a failed claim;
	// nil means the wall clock. A fake one lets tests step a long job
	// through its extensions without waiting for real leases.
	Clock Clock
	// WorkerID names this worker in its claims (queue describe's
	// in-flight list, each attempt's history in the dead letter); at most
	// MaxWorkerIDLen bytes. Default DefaultWorkerID(): host and process.
	WorkerID string
}

// MaxWorkerIDLen bounds a worker id (ClaimRequest.Worker).
const MaxWorkerIDLen = 128

// DefaultWorkerID names this process: "host/pid" (the host name as the
// kernel reports it, "unknown" if it cannot), cut to MaxWorkerIDLen bytes.
func DefaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	id := host + "/" + strconv.Itoa(os.Getpid())
	if len(id) > MaxWorkerIDLen {
		id = id[len(id)-MaxWorkerIDLen:] // keep the pid
	}
	return id
}

// Validate reports options that cannot be used.
func (o WorkerOptions) Validate() error {
	var errs []error
	if o.Topic == "" || o.Group == "" {
		errs = append(errs, errors.New("worker: topic and group are required"))
	}
	if o.Concurrency < 0 || o.MaxClaim < 0 || o.AckBatch < 0 || o.Ackers < 0 {
		errs = append(errs, errors.New("worker: concurrency, max claim, ack batch and ackers must not be negative"))
	}
	if o.Lease < 0 || o.MaxWait < 0 || o.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("worker: durations must not be negative"))
	}
	if len(o.WorkerID) > MaxWorkerIDLen {
		errs = append(errs, fmt.Errorf("worker: worker id of %d bytes, at most %d", len(o.WorkerID), MaxWorkerIDLen))
	}
	return errors.Join(errs...)
}

func (o WorkerOptions) withDefaults() WorkerOptions {
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.MaxClaim == 0 {
		o.MaxClaim = o.Concurrency
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultWorkerMaxWait
	}
	if o.AckBatch == 0 {
		o.AckBatch = DefaultWorkerAckBatch
	}
	if o.Ackers == 0 {
		o.Ackers = DefaultWorkerAckers
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultWorkerShutdownTimeout
	}
	if o.Clock == nil {
		o.Clock = wallClock{}
	}
	if o.WorkerID == "" {
		o.WorkerID = DefaultWorkerID()
	}
	return o
}

// Handler works one job. Returning nil acknowledges it; an error nacks it
// transiently (it is retried after the group's backoff, and dead-lettered
// after its last allowed delivery), and an error wrapped with Permanent
// nacks it permanently (dead-lettered at once). ctx ends when the worker
// stops or the job's lease is lost (another worker may then get the job).
//
// Delivery is at least once: a worker that dies between its effect and its
// ack gets the job redelivered to someone. Make handlers idempotent, for
// example by recording the job's id in the same transaction as its effect.
type Handler func(ctx context.Context, job *Job) error

// Worker claims jobs of a queue group and runs a handler on each, with
// bounded concurrency, extending the leases of long jobs and acknowledging
// or nacking each by its outcome. It starts goroutines only inside Run.
type Worker struct {
	c    *Client
	opts WorkerOptions
	h    Handler
}

// NewWorker returns a worker; Run starts it.
func (c *Client) NewWorker(opts WorkerOptions, h Handler) (*Worker, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("worker: handler is nil")
	}
	return &Worker{c: c, opts: opts.withDefaults(), h: h}, nil
}

func (w *Worker) report(err error) {
	if w.opts.OnError != nil && err != nil {
		w.opts.OnError(err)
	}
}

// Run claims and works jobs until ctx ends, then waits for running handlers
// (their context is canceled), sends their acks and nacks (within
// ShutdownTimeout), and returns nil. Every goroutine it starts has ended
// when it returns.
func (w *Worker) Run(ctx context.Context) error {
	o := w.opts
	// finishing carries acks and nacks past ctx's end.
	finishing := context.WithoutCancel(ctx)
	acks := make(chan string, o.AckBatch*o.Ackers)
	var ackers sync.WaitGroup
	for range o.Ackers {
		ackers.Go(func() { w.ackLoop(finishing, acks) })
	}
	slots := make(chan struct{}, o.Concurrency)
	var jobs sync.WaitGroup
	retry := time.Duration(0)
	for ctx.Err() == nil {
		// Wait for one free handler, then take every other free one.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n := 1
	more:
		for n < o.MaxClaim {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		res, err := w.c.Claim(ctx, ClaimRequest{Topic: o.Topic, Group: o.Group, MaxRecords: n, Lease: o.Lease, MaxWait: o.MaxWait, Worker: o.WorkerID})
		for range n - len(res.Jobs) {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			w.report(err)
			// Back off on repeated failures (the client already retried).
			retry = min(max(2*retry, 50*time.Millisecond), 2*time.Second)
			_ = o.Clock.Sleep(ctx, retry) // ctx's end is seen by the loop
			continue
		}
		retry = 0
		claimed := o.Clock.Now()
		for i := range res.Jobs {
			job := &res.Jobs[i]
			jobs.Go(func() {
				defer func() { <-slots }()
				w.work(ctx, finishing, job, claimed, acks)
			})
		}
	}
	jobs.Wait()
	close(acks)
	ackers.Wait()
	return nil
}

// work runs the handler on one job under an extender and queues its ack or
// sends its nack.
func (w *Worker) work(ctx, finishing context.Context, job *Job, claimed time.Time, acks chan<- string) {
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lease := w.opts.Lease
	if lease <= 0 {
		lease = max(job.LeaseDeadline.Sub(claimed), time.Second)
	}
	lost := make(chan struct{})
	// The extender ends when the handler returns (stop) or the job's
	// context ends.
	ectx, stop := context.WithCancel(jctx)
	var ext sync.WaitGroup
	ext.Go(func() { w.extendLoop(ectx, job, lease, lost, cancel) })
	err := w.run(jctx, job)
	stop()
	ext.Wait()
	select {
	case <-lost:
		// Another worker may own the job now; our ack would be refused.
		w.report(fmt.Errorf("job %s/%d@%d: lease lost; result dropped (handler error: %v)", job.Topic, job.Partition, job.Offset, err))
		return
	default:
	}
	if err == nil {
		acks <- job.Token
		return
	}
	n := Nack{Token: job.Token, Permanent: IsPermanent(err), Error: err.Error()}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Stopped, not failed: offer the job to another worker at once.
		zero := time.Duration(0)
		n.Delay, n.Error = &zero, "worker stopped: "+err.Error()
	}
	nctx, ncancel := context.WithTimeout(finishing, w.opts.ShutdownTimeout)
	defer ncancel()
	if _, err := w.c.Nack(nctx, job.Topic, job.Group, n); err != nil {
		w.report(fmt.Errorf("nack job %s/%d@%d: %w", job.Topic, job.Partition, job.Offset, err))
	}
}

// run calls the handler, turning a panic into a permanent error: a job that
// crashes its handler would crash it again.
func (w *Worker) run(ctx context.Context, job *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Permanent(fmt.Errorf("handler panic: %v", r))
		}
	}()
	return w.h(ctx, job)
}

// extendLoop extends the job's lease whenever half of what is left of it
// has passed, until ctx ends (the handler returned, or the job's context
// ended). A stale answer means the lease is lost: it closes lost and
// cancels the handler's context.
func (w *Worker) extendLoop(ctx context.Context, job *Job, lease time.Duration, lost chan<- struct{}, cancel context.CancelFunc) {
	clock := w.opts.Clock
	deadline := job.LeaseDeadline
	for {
		wait := deadline.Sub(clock.Now()) / 2
		if clock.Sleep(ctx, max(wait, time.Millisecond)) != nil {
			return
		}
		rs, err := w.c.Extend(ctx, job.Topic, job.Group, lease, job.Token)
		switch {
		case ctx.Err() != nil:
			return // the handler returned meanwhile: its ack or nack follows
		case err == nil && len(rs) == 1:
			deadline = rs[0].LeaseDeadline
		case errors.Is(err, ErrStaleToken):
			close(lost)
			cancel()
			return
		case err != nil:
			w.report(fmt.Errorf("extend job %s/%d@%d: %w", job.Topic, job.Partition, job.Offset, err))
			if clock.Now().After(deadline) {
				close(lost)
				cancel()
				return
			}
		}
	}
}

// ackLoop sends the acks of finished jobs in batches until acks closes.
func (w *Worker) ackLoop(ctx context.Context, acks <-chan string) {
	for tok := range acks {
		batch := []string{tok}
	drain:
		for len(batch) < w.opts.AckBatch {
			select {
			case t, ok := <-acks:
				if !ok {
					break drain
				}
				batch = append(batch, t)
			default:
				break drain
			}
		}
		actx, cancel := context.WithTimeout(ctx, w.opts.ShutdownTimeout+w.c.opts.Timeout)
		_, err := w.c.Ack(actx, w.opts.Topic, w.opts.Group, batch...)
		cancel()
		if err != nil {
			w.report(fmt.Errorf("ack %d jobs: %w", len(batch), err))
		}
	}
}
