package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Defaults applied to zero-valued Options fields. The retry defaults ride
// out a leader election (a few seconds in which writes answer NOT_LEADER
// or UNAVAILABLE): retries go on for up to DefaultMaxRetryTime, at most a
// second apart, so a call resumes soon after a new leader serves.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultMaxAttempts    = 30
	DefaultInitialBackoff = 50 * time.Millisecond
	DefaultMaxBackoff     = time.Second
	DefaultMaxRetryTime   = 10 * time.Second
)

// Options configure a Client. The zero value is ready to use: every field
// documents its default.
type Options struct {
	// HTTPClient carries the calls. Default: a client of its own with a
	// pooled HTTP/1.1 transport, closed by Client.Close. A client passed here
	// is not closed by Client.Close, and its own Timeout (if any) bounds
	// every call, long polls included.
	HTTPClient *http.Client

	// Timeout bounds each attempt of a call. A fetch that long-polls gets
	// its MaxWait on top. Default: DefaultTimeout.
	Timeout time.Duration

	// Retry controls how calls that fail with a retryable error are repeated.
	Retry RetryPolicy

	// ConsistentReads makes every read linearizable at its start: its
	// answer holds every write the cluster acknowledged before the call,
	// through any node (the node asks the leader for its read index and
	// waits until it applied it: a round to the leader and its quorum per
	// call). Without it, a node's reads hold the writes acknowledged
	// through that node, and a follower's may miss, for about a commit
	// round, writes acknowledged through others (docs/architecture.md,
	// "Read guarantees").
	ConsistentReads bool

	// FetchRecords makes fetches (Fetch, Consumer, GroupConsumer, the
	// dead-letter reads) ask the server for one protobuf record per record,
	// as curl and other callers of the JSON API get them, instead of the
	// stored record batches, which the client then decodes itself
	// (FetchRequest.batches in api/logd/v1/logd.proto; docs/guide.md, "The
	// Go client"). The records returned are the same either way; batches
	// cost the server less (it serves them as stored, compressed if their
	// producer compressed them) and the client more. A server of a build
	// that predates batches answers records whatever was asked, which the
	// client reads too, so the option is never needed to reach one.
	// Default: false, batches.
	FetchRecords bool

	// TLS, if set, makes the client speak HTTPS with this configuration
	// (a copy of it): RootCAs to trust the cluster's CA, Certificates or
	// GetClientCertificate for mutual TLS. HTTP/2 is negotiated by ALPN. A
	// "host:port" server then means https://host:port; an http:// URL is
	// refused. TLS cannot be combined with HTTPClient (configure that
	// client's transport instead). Default: none; an https:// server is
	// still reached over TLS, trusting the system's roots.
	TLS *tls.Config

	// Token is a bearer token ("logd_<id>.<secret>", see
	// docs/security.md), sent as "Authorization: Bearer <token>" on every
	// call and every retry. Default: none (the server sees the TLS client
	// certificate's principal, if any, else an anonymous caller).
	Token string

	// TokenSource, if set, is asked for the bearer token before every
	// attempt of every call, for tokens that change (read from a file
	// that is rotated, or from a secret store). An empty token sends no
	// Authorization header; an error fails the attempt with that error.
	// It may be called concurrently. Set Token or TokenSource, not both.
	TokenSource func(context.Context) (string, error)
}

// RetryPolicy bounds the retries of a call that failed with a retryable
// error (see IsRetryable). The delay before attempt n+1 is drawn uniformly
// from [c/2, c), c = min(MaxBackoff, InitialBackoff*2^(n-1)) ("equal
// jitter"), and is at least the server's retry-after hint when it gave one.
// Retries stop after MaxAttempts attempts, when no retry could start within
// MaxRetryTime of the first attempt (or within Deadline), and when the
// caller's context ends: whichever comes first. Refusals for overload may
// have bounds of their own (MaxOverloadWait, FailOverloaded).
//
// Which calls are retried: reads and metadata reads (ListTopics,
// DescribeTopic, Fetch, Status) on every retryable error, and so are writes
// whose repetition changes nothing more (a Produce whose records all carry
// idempotency keys, commits, acks). Other writes (a Produce without keys,
// CreateTopic, DeleteTopic) are retried only when the server guarantees
// nothing was written: not leader, overloaded, or a request that never
// completely reached the server (a connection that could not be made, or
// that broke while the request was written). Once an attempt of a write may have been applied, the
// call's error is ErrOutcomeUnknown (OutcomeUnknownError) unless a later
// attempt succeeds.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first included; 1 disables
	// retries. Default: DefaultMaxAttempts.
	MaxAttempts int
	// InitialBackoff caps the first delay. Default: DefaultInitialBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps every delay (except a server's retry-after hint).
	// Default: DefaultMaxBackoff.
	MaxBackoff time.Duration
	// OnRetry, if set, is called before each retry's wait, on the calling
	// goroutine, for logging or metrics. Default: nothing.
	OnRetry func(RetryEvent)
	// MaxRetryTime bounds the time over which a call is retried: no retry
	// starts later than MaxRetryTime after the first attempt started, and
	// no backoff is slept that would end later. Unlike Deadline it never
	// cuts an attempt short, so long polls keep their wait. Default:
	// DefaultMaxRetryTime.
	MaxRetryTime time.Duration
	// Deadline, if positive, bounds all attempts of a call together (on
	// top of the context's deadline): each attempt's timeout is clipped to
	// what remains and no backoff crosses it. Default: the context's only.
	Deadline time.Duration
	// Budget limits retries across every call that uses it (policy.go).
	// Default for a Client: a budget of its own, NewRetryBudget(0, 0, 0,
	// nil), shared by all its calls; for a standalone Retrier: unlimited.
	Budget *RetryBudget
	// MaxOverloadWait, if positive, gives refusals for overload
	// (ErrOverloaded: admission control, quotas, queue backlog bounds)
	// bounds of their own, so that a caller can wait out backpressure for
	// longer, or shorter, than it rides out an election: after such a
	// refusal a retry may start up to MaxOverloadWait after the first
	// attempt, in place of MaxRetryTime, and attempts refused for
	// overload do not count toward MaxAttempts. Each wait is still at
	// least the server's RetryAfter, and Deadline, the context and the
	// Budget still apply. Default: 0, overload refusals are retried
	// within MaxAttempts and MaxRetryTime like any retryable failure.
	MaxOverloadWait time.Duration
	// FailOverloaded ends a call at its first refusal for overload, with
	// the *OverloadedError whose RetryAfter says when to try again: for a
	// caller that applies backpressure itself (or a script that would
	// rather fail fast than wait). Other failures are retried as usual.
	// Default: false.
	FailOverloaded bool
}

// Validate reports options that cannot be used. Zero values are valid.
func (o Options) Validate() error {
	var errs []error
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v is negative", o.Timeout))
	}
	if err := o.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Token != "" && o.TokenSource != nil {
		errs = append(errs, errors.New("set Token or TokenSource, not both"))
	}
	if err := checkToken(o.Token); err != nil {
		errs = append(errs, err)
	}
	if o.TLS != nil && o.HTTPClient != nil {
		errs = append(errs, errors.New("TLS and HTTPClient: configure TLS in the HTTP client's transport"))
	}
	return errors.Join(errs...)
}

// Validate reports a policy that cannot be used. The zero value is valid.
func (p RetryPolicy) Validate() error {
	var errs []error
	if p.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("retry: max attempts %d is negative", p.MaxAttempts))
	}
	if p.InitialBackoff < 0 {
		errs = append(errs, fmt.Errorf("retry: initial backoff %v is negative", p.InitialBackoff))
	}
	if p.MaxBackoff < 0 {
		errs = append(errs, fmt.Errorf("retry: max backoff %v is negative", p.MaxBackoff))
	}
	if p.MaxRetryTime < 0 {
		errs = append(errs, fmt.Errorf("retry: max retry time %v is negative", p.MaxRetryTime))
	}
	if p.Deadline < 0 {
		errs = append(errs, fmt.Errorf("retry: deadline %v is negative", p.Deadline))
	}
	if p.MaxOverloadWait < 0 {
		errs = append(errs, fmt.Errorf("retry: max overload wait %v is negative", p.MaxOverloadWait))
	}
	if p.FailOverloaded && p.MaxOverloadWait > 0 {
		errs = append(errs, fmt.Errorf("retry: FailOverloaded with a max overload wait of %v: choose one", p.MaxOverloadWait))
	}
	if p.InitialBackoff > 0 && p.MaxBackoff > 0 && p.MaxBackoff < p.InitialBackoff {
		errs = append(errs, fmt.Errorf("retry: max backoff %v is below initial backoff %v", p.MaxBackoff, p.InitialBackoff))
	}
	return errors.Join(errs...)
}

// withDefaults returns o with zero fields replaced by their defaults.
// HTTPClient is left alone: New decides who owns it.
func (o Options) withDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	o.Retry = o.Retry.withDefaults()
	if o.Retry.Budget == nil {
		o.Retry.Budget = NewRetryBudget(0, 0, 0, nil) // one per Client
	}
	return o
}
