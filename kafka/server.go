package kafka

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/membudget"
	"github.com/logd-dev/logd/internal/quota"
)

// Defaults of Limits.
const (
	// DefaultMaxRequestBytes bounds one request, as the Connect API's
	// default bounds one body: the largest max.message.bytes a topic may
	// have.
	DefaultMaxRequestBytes = 64 << 20
	// DefaultAnswerWait is how long a Fetch waits for room in the answer
	// budget (Options.Answers) before it is answered empty and throttled.
	DefaultAnswerWait = 500 * time.Millisecond
	// DefaultInflightBytes is the memory budget of requests being read or
	// handled at once, as the Connect API's.
	DefaultInflightBytes = 256 << 20
	// DefaultMaxFetchBytes caps the records of one fetch response (a
	// client asks for up to its fetch.max.bytes; it gets at least one
	// batch either way).
	DefaultMaxFetchBytes = 32 << 20
	// DefaultMaxFetchWait caps a fetch's long poll (max_wait_ms).
	DefaultMaxFetchWait = 60 * time.Second
	// DefaultIdleTimeout closes a connection that sends no request for
	// that long, as Kafka's connections.max.idle.ms.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultRequestTimeout bounds the time to receive one request once
	// its size has arrived, plus a second per DefaultRequestMinRate bytes.
	DefaultRequestTimeout = 20 * time.Second
	// DefaultRequestMinRate is the slowest request a client may send
	// (bytes per second) after DefaultRequestTimeout.
	DefaultRequestMinRate = 64 << 10
	// DefaultWriteTimeout bounds the time to write one response.
	DefaultWriteTimeout = time.Minute
	// DefaultReadAhead is how many requests of one connection are read
	// before the earlier ones are answered (clients pipeline requests).
	DefaultReadAhead = 8
	// readyWait is how long a request waits for the node to be ready (a
	// new leader applying the barrier of its term) before it is answered
	// with a retriable error.
	readyWait = time.Second
)

// Limits bounds what clients of the Kafka listener may cost the node. The
// zero value takes the defaults; a negative value switches a bound off
// (MaxRequestBytes, InflightBytes and the timeouts).
type Limits struct {
	// MaxRequestBytes bounds one request: a larger one closes its
	// connection before it is read, as Kafka's socket.request.max.bytes.
	MaxRequestBytes int64
	// InflightBytes is the memory budget of requests being read or
	// handled: a reader waits for room before it reads a body.
	InflightBytes int64
	// MaxFetchBytes caps the record bytes of one fetch response.
	MaxFetchBytes int32
	// MaxFetchWait caps a fetch's long poll.
	MaxFetchWait time.Duration
	// IdleTimeout closes a connection with no request for that long.
	IdleTimeout time.Duration
	// RequestTimeout and RequestMinRate bound the time to receive a
	// request once its size is in: RequestTimeout plus one second per
	// RequestMinRate bytes.
	RequestTimeout time.Duration
	RequestMinRate int64
	// WriteTimeout bounds the time to write one response.
	WriteTimeout time.Duration
	// ReadAhead is how many requests of a connection are read before the
	// earlier ones are answered.
	ReadAhead int
}

func (l Limits) withDefaults() Limits {
	set := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	setd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&l.MaxRequestBytes, DefaultMaxRequestBytes)
	set(&l.InflightBytes, DefaultInflightBytes)
	set(&l.RequestMinRate, DefaultRequestMinRate)
	if l.MaxFetchBytes <= 0 {
		l.MaxFetchBytes = DefaultMaxFetchBytes
	}
	setd(&l.MaxFetchWait, DefaultMaxFetchWait)
	setd(&l.IdleTimeout, DefaultIdleTimeout)
	setd(&l.RequestTimeout, DefaultRequestTimeout)
	setd(&l.WriteTimeout, DefaultWriteTimeout)
	if l.ReadAhead <= 0 {
		l.ReadAhead = DefaultReadAhead
	}
	return l
}

// Options configures a Server.
type Options struct {
	// Backend is the node (replication.NewBackend). Required.
	Backend backend.Kafka
	// Advertise is this node's Kafka address as Metadata gives it to
	// clients, host:port. Required.
	Advertise string
	// PeerAddress maps the registered client API address of another node
	// that registered no Kafka address to its Kafka address (PortOffset);
	// nil lists only the nodes that registered one, and this node.
	PeerAddress func(apiAddress string) (string, bool)
	// AutoCreateTopics lets a Metadata request that allows it create the
	// topics it names (with DefaultPartitions partitions). Off by default:
	// sarama and kafkajs ask for it unless told not to.
	AutoCreateTopics bool
	// DefaultPartitions is the partition count of an auto-created topic,
	// and of a CreateTopics that asks for the default (-1). Default 1, as
	// Kafka's num.partitions.
	DefaultPartitions int32
	// Limits bounds requests and connections' timing (the zero value
	// takes the defaults).
	Limits Limits
	// Auth is authentication, authorization, quotas and the audit log
	// (auth.go); the zero value checks nothing (--auth none).
	Auth AuthOptions
	// Groups configures the consumer group coordinator (the zero value
	// takes the defaults).
	Groups GroupOptions
	// Forward makes topic changes asked of a node that does not lead on
	// the leader (forward.go); nil answers them NOT_CONTROLLER.
	Forward Forwarder
	// Traffic counts each topic's records and bytes produced and fetched
	// into the node's per-topic series, which the Connect API counts into
	// too (server.Server.TopicTraffic); nil counts nothing.
	Traffic TopicTraffic
	// Answers is the node's answer memory budget, which the Connect API
	// shares (server.Server.AnswerBudget): each Fetch answer is charged
	// before it is read, for the most it may reach, trimmed to what it
	// holds, and released once written; one that does not fit within
	// AnswerWait is answered empty with throttle_time_ms, as Kafka
	// throttles. Nil: answers are not bounded.
	Answers *membudget.Budget
	// AnswerWait is how long a Fetch waits for room in Answers
	// (DefaultAnswerWait).
	AnswerWait time.Duration
	// Registerer receives the metrics (metrics.go); nil registers none.
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Server serves the Kafka protocol over a Backend. Serve runs it on a
// listener; Close stops it. Its methods are safe for concurrent use.
type Server struct {
	b         backend.Kafka
	advertise string
	peer      func(string) (string, bool)
	autoMake  bool
	defParts  int32
	limits    Limits
	logger    *slog.Logger
	metrics   *metrics
	budget    *membudget.Budget
	// answers and answerWait are Options.Answers and AnswerWait.
	answers    *membudget.Budget
	answerWait time.Duration
	// authz, quotas, auditLog and handshakeTimeout are Options.Auth's
	// (auth.go).
	authz            *auth.Authorizer
	quotas           *quota.Limiter
	auditLog         *slog.Logger
	handshakeTimeout time.Duration
	nodeOf           func(*tls.ConnectionState) (string, bool)
	sasl             SASLOptions
	groups           *coordinator
	share            *shareCoordinator
	forward          Forwarder
	traffic          TopicTraffic
	// relay forwards share requests to the leader and, there, serves
	// those of other nodes (share_forward.go).
	relay shareRelay

	// ctx ends when the server closes; it bounds every handler.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	lns    map[net.Listener]struct{} // guarded by mu
	conns  map[*conn]struct{}        // guarded by mu
	closed bool                      // guarded by mu
	wg     sync.WaitGroup
}

// ErrServerClosed is what Serve returns once Close was called.
var ErrServerClosed = errors.New("kafka: server closed")

// New returns a Server; it starts nothing.
func New(opts Options) (*Server, error) {
	if opts.Backend == nil {
		return nil, errors.New("kafka: a backend is required")
	}
	if _, _, err := splitHostPort(opts.Advertise); err != nil {
		return nil, fmt.Errorf("kafka: advertised address %q: %w", opts.Advertise, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := opts.Auth.SASL.check(); err != nil {
		return nil, err
	}
	if opts.Auth.SASL.Now == nil {
		opts.Auth.SASL.Now = time.Now
	}
	if opts.DefaultPartitions <= 0 {
		opts.DefaultPartitions = 1
	}
	l := opts.Limits.withDefaults()
	s := &Server{
		b: opts.Backend, advertise: opts.Advertise, peer: opts.PeerAddress,
		autoMake: opts.AutoCreateTopics, defParts: opts.DefaultPartitions,
		limits: l, logger: opts.Logger,
		// The request budget: a reader waits for room (conn.go), as a
		// Kafka client cannot be told to retry before its request is read,
		// and a reader that stops reading holds the client back by TCP.
		budget:  membudget.New(l.InflightBytes, 0),
		answers: opts.Answers, answerWait: cmp.Or(opts.AnswerWait, DefaultAnswerWait),
		authz: opts.Auth.Authorizer, quotas: opts.Auth.Quotas,
		auditLog: cmp.Or(opts.Auth.Audit, opts.Logger), handshakeTimeout: cmp.Or(opts.Auth.HandshakeTimeout, defaultHandshakeTimeout),
		nodeOf: opts.Auth.VerifiedNode, sasl: opts.Auth.SASL, forward: opts.Forward, traffic: opts.Traffic,
		lns: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
	}
	if l.MaxRequestBytes > 0 && l.InflightBytes > 0 && l.MaxRequestBytes > l.InflightBytes {
		return nil, fmt.Errorf("kafka: in-flight budget of %d bytes is below the request bound of %d", l.InflightBytes, l.MaxRequestBytes)
	}
	s.metrics = newMetrics(opts.Registerer, s.budget)
	if s.traffic == nil {
		s.traffic = noTraffic{}
	}
	s.groups = newCoordinator(s, opts.Groups, opts.Registerer)
	s.share = newShareCoordinator(s, opts.Groups.withDefaults())
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Serve accepts connections on ln and serves each until it closes or the
// server does; it returns ErrServerClosed after Close, or the listener's
// error. The caller bounds the connections by the listener it passes.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	s.serveLeaderCalls()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("kafka: accept: %w", err)
			}
			// Anything else (EMFILE, a connection reset before it was
			// accepted) passes: wait a little and accept again, rather
			// than stop serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logger.Warn("kafka: accept", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-s.ctx.Done():
				return ErrServerClosed
			}
		}
		backoff = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.metrics.connsOpen.Inc()
		s.metrics.connsTotal.Inc()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.metrics.connsOpen.Dec()
		}()
	}
}

// Close stops accepting, closes every connection (requests being handled
// end: a write whose Raft entry was proposed may still commit, as after
// any lost connection) and waits for their goroutines. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	s.stopLeaderCalls()
	s.groups.close()
	s.share.close()
	var errs []error
	for ln := range s.lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(errs...)
}

// splitHostPort splits host:port with a numeric port in 1..65535.
func splitHostPort(addr string) (string, int32, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("port %q: want 1..65535", p)
	}
	if host == "" {
		return "", 0, errors.New("empty host")
	}
	return host, int32(port), nil
}
