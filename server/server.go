package server

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication"
)

// Limits on requests. A request beyond them is refused whole.
const (
	// MaxRequestBytes bounds one encoded request.
	MaxRequestBytes = 64 << 20
	// MaxRecordsPerProduce bounds the records of one produce call.
	MaxRecordsPerProduce = 100_000
	// DefaultFetchBytes is a fetch's max_bytes when the request leaves it 0.
	DefaultFetchBytes = 1 << 20
	// MaxFetchBytes caps a fetch's max_bytes.
	MaxFetchBytes = 32 << 20
	// MaxFetchWaitMs caps a fetch's long-poll wait.
	MaxFetchWaitMs = 60_000
)

// Options configures a Server.
type Options struct {
	// Node is the local Raft node. Required.
	Node *replication.Node
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics; default a new registry with
	// the Go and process collectors.
	Registry *prometheus.Registry
}

// Server implements the LogService handlers over a replication.Node.
type Server struct {
	// Unimplemented answers CodeUnimplemented for RPCs added to the API
	// before their handler exists, so the API can grow ahead of the server.
	logdv1connect.UnimplementedLogServiceHandler

	node    *replication.Node
	logger  *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics
	// groupMetrics are the consumer group metrics (group_metrics.go).
	groupMetrics *groupMetrics
	// queueHealth holds queue health rates and refusals (queue_health.go).
	queueHealth *queueHealth
	// fwd forwards writes to the leader (forward.go).
	fwd *forwarder

	mu sync.Mutex
	// rr holds the round-robin counter of each topic for keyless records;
	// guarded by mu (the counters themselves are atomic).
	rr map[string]*atomic.Uint32
}

// New builds a Server. It starts nothing.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{node: opts.Node, logger: opts.Logger, reg: opts.Registry, rr: map[string]*atomic.Uint32{}}
	s.metrics = newMetrics(opts.Registry, opts.Node)
	s.groupMetrics = newGroupMetrics(opts.Registry, opts.Node)
	s.queueHealth = newQueueHealth(opts.Registry, opts.Node)
	s.fwd = newForwarder(s)
	return s
}

// Handler returns the HTTP handler for the API, /metrics, /healthz and
// /readyz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	path, h := logdv1connect.NewLogServiceHandler(s,
		connect.WithReadMaxBytes(MaxRequestBytes),
		// Compressed requests are accepted, but responses are not gzipped:
		// record bytes rarely shrink much and the CPU is better spent
		// serving. Producers compress batches themselves.
		connect.WithCompressMinBytes(math.MaxInt32),
		connect.WithInterceptors(s.metrics.interceptor(), s.leaderHintInterceptor(), s.readyInterceptor()),
	)
	mux.Handle(path, s.fwd.wrap(h))
	mux.Handle(segmentMetaPath, s.segmentHandler())
	mux.Handle(segmentDataPath, s.segmentHandler())
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.node.FSM().Failed(); err != nil {
			http.Error(w, "failed: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case s.node.FSM().Failed() != nil:
			http.Error(w, "not ready: node stopped after a state machine failure", http.StatusServiceUnavailable)
			return
		case !s.node.Ready():
			http.Error(w, "not ready: catching up with the Raft log", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// readyInterceptor refuses calls with a retryable UNAVAILABLE until the
// node has caught up with its Raft log, so a restarted node never answers
// from an old state. Status is always served.
func (s *Server) readyInterceptor() connect.UnaryInterceptorFunc {
	status := logdv1connect.LogServiceStatusProcedure
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if req.Spec().Procedure != status && !s.node.Ready() {
				// NOT_LEADER: like a follower that cannot forward, this node
				// wrote nothing, so even a write may be retried at once.
				return nil, withInfo(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER},
					errors.New("node is catching up with its Raft log; retry shortly"))
			}
			return next(ctx, req)
		}
	}
}

// nextRoundRobin returns the next partition counter value for keyless
// records of a topic.
func (s *Server) nextRoundRobin(topic string) uint32 {
	s.mu.Lock()
	c, ok := s.rr[topic]
	if !ok {
		c = new(atomic.Uint32)
		s.rr[topic] = c
	}
	s.mu.Unlock()
	return c.Add(1) - 1
}

var _ logdv1connect.LogServiceHandler = (*Server)(nil)
