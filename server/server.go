package server

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/console"
	"github.com/logd-dev/logd/peer"
)

// Limits on requests. A request beyond them is refused whole.
const (
	// MaxRequestBytes is the default bound of one request body, as sent
	// and as inflated (Limits.MaxRequestBytes): the largest
	// max.message.bytes a topic may have.
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
	// Backend is the node the handlers serve from (cmd/logd passes
	// replication.NewBackend of its node). Required.
	Backend backend.API
	// Segments, if set, is mounted at backend.SegmentPathPrefix: the
	// segment files peers fetch to catch up from a snapshot
	// (replication.Backend.SegmentHandler). A node of a cluster needs it.
	// It is served by Handler, or by PeerHandler alone with PeerListener.
	Segments http.Handler
	// PeerListener says the node serves node-to-node calls (segments,
	// forwarded writes, joins and the leader's questions to a joining
	// node) on a listener of its own, with PeerHandler (cmd/logd's
	// --peer-listen). Handler then serves no /internal/ path (404) and
	// drops the forwarding headers from every request, so a call on the
	// client port is a client's whoever makes it (peer.go).
	PeerListener bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics; default a new registry with
	// the Go and process collectors.
	Registry *prometheus.Registry
	// Limits bounds requests: body size, decompression, the memory budget
	// of bodies in flight, body and answer deadlines (limits.go). The zero
	// value takes the defaults.
	Limits Limits
	// Conns bounds the connections of the listeners wrapped by
	// Server.Listener (listener.go). The zero value bounds nothing.
	Conns ConnLimits
	// Peers routes this node's dials to other nodes' API addresses
	// (forwarding to the leader, the questions to a joining node); nil
	// dials the registered addresses (peer.Resolver).
	Peers *peer.Resolver
	// PeerTLS, when set (the node's replication.Config.PeerTLS), makes
	// this node's calls to peers' API ports (forwarding, the questions to
	// a joining node) https with PeerTLS.HTTPClient (the peer must present
	// a node certificate), and names the node behind a Join's connection
	// (join.go). Nil: plaintext.
	PeerTLS *peer.TLS
	// Auth is authentication, authorization, the audit log and quotas
	// (authn.go, authz.go, audit.go, quota.go). The zero value checks
	// nothing (--auth none).
	Auth AuthOptions
	// HistoryInterval is how often RunHistory samples the metrics the
	// console charts (history.go); default DefaultHistoryInterval.
	HistoryInterval time.Duration
}

// Server implements the LogService handlers over a Backend.
type Server struct {
	// Unimplemented answers CodeUnimplemented for RPCs added to the API
	// before their handler exists, so the API can grow ahead of the server.
	logdv1connect.UnimplementedLogServiceHandler

	b        backend.API
	segments http.Handler
	logger   *slog.Logger
	reg      *prometheus.Registry
	metrics  *metrics
	// groupMetrics are the consumer group metrics (group_metrics.go).
	groupMetrics *groupMetrics
	// queueHealth holds queue health rates and refusals (queue_health.go).
	queueHealth *queueHealth
	// history holds the samples the console charts (history.go).
	history *history
	// fwd forwards writes to the leader (forward.go).
	fwd *forwarder
	// traffic counts records and bytes in and out per topic
	// (topic_metrics.go).
	traffic *TopicTraffic
	// quotaMetrics shows the topic quota and counts its refusals
	// (quota_metrics.go).
	quotaMetrics *quotaMetrics
	// limiter bounds requests (request_limits.go); conns and connMetrics
	// bound and count connections (listener.go), pool those of the
	// listeners under conns, made once by poolOnce.
	limiter *requestLimiter
	// answers is the answer memory budget (answer_budget.go).
	answers     *answers
	conns       ConnLimits
	connMetrics *connMetrics
	poolOnce    sync.Once
	pool        *connPool
	// peers maps a peer's API address to the one this node dials.
	peers *peer.Resolver
	// peerTLS is Options.PeerTLS; peerHTTP how this node calls peers.
	peerTLS  *peer.TLS
	peerHTTP peer.HTTP
	// leaderHTTP makes this node's own calls to the leader
	// (group_describe.go).
	leaderHTTP *http.Client
	// peerListener is Options.PeerListener.
	peerListener bool
	// api is the LogService behind authentication and forwarding, which
	// Handler and PeerHandler share; built once by apiHandler.
	apiOnce sync.Once
	api     http.Handler

	// auth and authn authenticate calls (authn.go); authz decides their
	// permissions (authz.go); sec is the backend's tokens and ACLs; audit
	// is the audit log
	// (audit.go); quotas bound principals' byte rates (quota.go).
	auth   AuthOptions
	authn  *authenticator
	authz  *auth.Authorizer
	sec    backend.SecurityAPI
	audit  *slog.Logger
	quotas *quotas
	// check decodes a write a follower forwards, to authorize it first
	// (forward_authz.go); set by Handler.
	check http.Handler
}

// New builds a Server. It starts nothing. Options.Limits must be valid
// (Limits.Validate).
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	// Lines logged with a call's context carry its request id
	// (request_id.go).
	opts.Logger = slog.New(requestIDHandler{opts.Logger.Handler()})
	if opts.Auth.Audit != nil {
		opts.Auth.Audit = slog.New(requestIDHandler{opts.Auth.Audit.Handler()})
	}
	s := &Server{b: opts.Backend, segments: opts.Segments, logger: opts.Logger, reg: opts.Registry, conns: opts.Conns, peers: opts.Peers,
		peerTLS: opts.PeerTLS, peerHTTP: peer.NewHTTP(opts.Peers, opts.PeerTLS), peerListener: opts.PeerListener,
		auth: opts.Auth, audit: cmp.Or(opts.Auth.Audit, opts.Logger)}
	s.leaderHTTP = newLeaderClient(s.peerHTTP)
	s.sec = opts.Backend
	s.authz = auth.NewAuthorizer(opts.Auth.Required, opts.Auth.Superusers, s.sec.ACLs)
	s.authn = newAuthenticator(opts.Auth, s.sec, s.authz, opts.Registry)
	s.authn.onRefused = s.auditRefusedRequest
	s.authn.isMember = s.isMember
	s.authn.verifiedNode = s.peerTLS.VerifiedNode
	if s.auth.Now == nil {
		s.auth.Now = time.Now
	}
	s.quotas = newQuotas(opts.Auth.Quotas, s.auth.Now, opts.Registry)
	s.limiter = newRequestLimiter(opts.Limits, opts.Registry)
	s.answers = newAnswers(opts.Limits.withDefaults(), opts.Registry)
	s.connMetrics = newConnMetrics(opts.Registry)
	s.metrics = newMetrics(opts.Registry, opts.Backend)
	s.traffic = newTopicTraffic(opts.Registry, opts.Backend)
	s.groupMetrics = newGroupMetrics(opts.Registry, opts.Backend)
	s.queueHealth = newQueueHealth(opts.Registry, opts.Backend)
	s.history = newHistory(opts.HistoryInterval)
	s.fwd = newForwarder(s)
	s.quotaMetrics = newQuotaMetrics(opts.Registry, opts.Backend)
	return s
}

// Handler returns the HTTP handler for the API, /metrics, /healthz,
// /readyz, the web console at /ui/, grpc.health.v1 and gRPC reflection (health.go), and for the segment endpoint unless Options.PeerListener puts
// it on PeerHandler (peer.go).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/"+logdv1connect.LogServiceName+"/", s.apiHandler())
	if s.segments != nil && !s.peerListener {
		mux.Handle(backend.SegmentPathPrefix, s.segments)
	}
	mux.Handle("/metrics", s.OpsGuard(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})))
	mux.Handle("/healthz", s.OpsGuard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := s.b.Failed(); err != nil {
			http.Error(w, "failed: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})))
	mux.Handle("/readyz", s.OpsGuard(http.HandlerFunc(s.serveReadyz)))
	s.mountProbes(mux) // health.go
	// The web console's static assets (docs/console.md): public, since
	// they hold no data; every call they make is an API call, authenticated
	// and authorized like any other.
	mux.Handle(console.Prefix, console.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusFound))
	var h http.Handler = mux
	if s.peerListener {
		h = dropForwarding(mux)
	}
	return withRequestID(s.limiter.wrap(h, isSegmentPath))
}

// isSegmentPath reports whether r is for the segment endpoint or a
// backup (save_snapshot.go), whose streamed answers the request limits do
// not time (request_limits.go): they may be large.
func isSegmentPath(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, backend.SegmentPathPrefix) || r.URL.Path == logdv1connect.LogServiceSaveSnapshotProcedure
}

// apiHandler returns the LogService behind authentication and
// forwarding, which Handler and PeerHandler share; built on first use.
func (s *Server) apiHandler() http.Handler {
	s.apiOnce.Do(func() { s.api = s.buildAPI() })
	return s.api
}

func (s *Server) buildAPI() http.Handler {
	limit := s.limiter.maxBytes()
	options := []connect.HandlerOption{
		// No read bound of Connect's own: the request limits bound every
		// body before Connect reads it (request_limits.go) and refuse it
		// with RECORD_TOO_LARGE. Connect's bound would refuse first, with
		// RESOURCE_EXHAUSTED and no reason, which clients take for
		// "overloaded" and retry, after reading the rest of the body to
		// report its size.
		connect.WithReadMaxBytes(0),
		// Messages inflate under the same bound (decompress.go).
		connect.WithCompression("gzip", newBoundedGzip(limit, func() error { return s.limiter.errTooLarge(-1) }), gzipCompressor),
		// Compressed requests are accepted, but responses are not gzipped:
		// record bytes rarely shrink much and the CPU is better spent
		// serving. Producers compress batches themselves.
		connect.WithCompressMinBytes(math.MaxInt32),
	}
	// Authorization runs once the node is ready (its ACLs are caught up),
	// inside the audit log (which records refusals) and before the quotas
	// (a refused call costs its principal nothing).
	_, h := logdv1connect.NewLogServiceHandler(s, append(options,
		connect.WithInterceptors(s.metrics.interceptor(), s.errorLogInterceptor(), s.appliedIndexInterceptor(), s.leaderHintInterceptor(), s.readyInterceptor(), s.readFloorInterceptor(),
			s.auditInterceptor(), s.authzInterceptor(), s.quotas.interceptor()))...)
	_, s.check = logdv1connect.NewLogServiceHandler(s, append(options, connect.WithInterceptors(s.checkInterceptor()))...)
	return s.authn.wrap(s.fwd.wrap(s.answers.wrap(h)))
}

// readyInterceptor holds calls until the node is ready (it has caught up
// with its Raft log; a new leader has applied the barrier of its term), so
// a node never answers from an old state. A call waits at most leaderWait
// (forward.go) and while its caller waits: a new leader is ready a few
// milliseconds after its election, and answering then saves the client a
// failed attempt and a backoff. After that it is refused with a retryable
// UNAVAILABLE. Status is always served at once.
func (s *Server) readyInterceptor() connect.UnaryInterceptorFunc {
	status := logdv1connect.LogServiceStatusProcedure
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if req.Spec().Procedure != status && !waitUntil(ctx, leaderWait, s.b.Ready) {
				// NOT_LEADER: like a follower that cannot forward, this node
				// wrote nothing, so even a write may be retried at once.
				return nil, withInfo(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER},
					errors.New("node is not ready (catching up with its Raft log, or a new leader applying its barrier); retry shortly"))
			}
			return next(ctx, req)
		}
	}
}

var _ logdv1connect.LogServiceHandler = (*Server)(nil)
