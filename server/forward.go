package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// Leader forwarding. Any node accepts any call: a write that reaches a
// follower is reverse-proxied, as the same HTTP request, to the leader's
// registered peer address (its peer listener, peer.go), or its API
// address when it registered none, so it works for every protocol
// (Connect, gRPC, gRPC-Web) and every write RPC without per-RPC code.
// Reads are served locally from applied state.
//
// How an RPC opts in: every LogService procedure is a write, and is
// forwarded, unless it is listed in localProcedures. A new write RPC needs
// nothing; a new read RPC adds its procedure to localProcedures (forgetting
// only costs a hop to the leader).
//
// A forwarded request carries ForwardedHeader, and a node never forwards a
// request that has it, so a leader change during forwarding cannot make a
// loop: the second node answers NOT_LEADER with the leader's address
// instead, and the client retries there.
//
// During a failover a write does not bounce back to the client at once:
// while this node knows no leader, or knows one whose address refused a
// connection lately (it died, and this node has not yet given up on it),
// the write waits, at most leaderWait and while its caller waits, for a
// leader to be elected, and then goes there (or is served here, if this
// node won). A forward whose connection to the leader failed sent nothing,
// so it is tried once more the same way. The client's call then takes as
// long as the election, instead of failing and retrying after a backoff.

// ForwardedHeader marks a request forwarded by another node (its value is
// that node's id).
const ForwardedHeader = "Logd-Forwarded-By"

// ForwardedNodeHeader, on a forwarded request, is the node id of the
// verified node certificate the forwarding node's caller presented (absent
// when none). The leader believes it only on a connection that presented
// a node certificate itself (join.go).
const ForwardedNodeHeader = "Logd-Forwarded-Node"

// MembersHeader, on every API response, lists the client API addresses of
// the cluster's registered nodes (comma-separated), so clients learn where
// to go when their node fails.
const MembersHeader = "Logd-Members"

// localProcedures are served by any node from its applied state.
var localProcedures = map[string]bool{
	logdv1connect.LogServiceFetchProcedure:                true,
	logdv1connect.LogServiceListTopicsProcedure:           true,
	logdv1connect.LogServiceDescribeTopicProcedure:        true,
	logdv1connect.LogServiceListOffsetsProcedure:          true,
	logdv1connect.LogServiceStatusProcedure:               true,
	logdv1connect.LogServiceGroupFetchProcedure:           true,
	logdv1connect.LogServiceListGroupsProcedure:           true,
	logdv1connect.LogServiceDescribeGroupProcedure:        true,
	logdv1connect.LogServiceDescribeQueueGroupProcedure:   true,
	logdv1connect.LogServiceListQueueGroupsProcedure:      true,
	logdv1connect.LogServiceWhoAmIProcedure:               true,
	logdv1connect.LogServiceDescribeRedriveProcedure:      true,
	logdv1connect.LogServiceListRedrivesProcedure:         true,
	logdv1connect.LogServiceListDeadLettersProcedure:      true,
	logdv1connect.LogServiceListTokensProcedure:           true,
	logdv1connect.LogServiceListACLsProcedure:             true,
	logdv1connect.LogServiceListScramCredentialsProcedure: true,
	// The table of data groups is replicated: any node answers what it
	// applied (cluster_moves.go).
	logdv1connect.LogServiceListMovesProcedure:   true,
	logdv1connect.LogServicePlanBalanceProcedure: true,
	// The node's own samples (history.go): each node answers its view.
	logdv1connect.LogServiceGetHistoryProcedure: true,
	// A backup is a stream the leader writes: a follower answers
	// NOT_LEADER with the leader's address rather than proxy it
	// (save_snapshot.go).
	logdv1connect.LogServiceSaveSnapshotProcedure: true,
}

// routedGroupProcedures are the consumer group writes the backend routes
// to each group's home itself once it does (backend.GroupAPI.RoutesGroups:
// groups kept in data groups, docs/architecture.md, "Consumer groups"):
// served by the node that receives them, so a group's commits go to its
// home's leader without passing through the meta leader.
var routedGroupProcedures = map[string]bool{
	logdv1connect.LogServiceJoinGroupProcedure:         true,
	logdv1connect.LogServiceGroupHeartbeatProcedure:    true,
	logdv1connect.LogServiceLeaveGroupProcedure:        true,
	logdv1connect.LogServiceCommitOffsetsProcedure:     true,
	logdv1connect.LogServiceResetGroupOffsetsProcedure: true,
	logdv1connect.LogServiceDeleteGroupProcedure:       true,
}

// forwarder proxies write requests to the leader.
type forwarder struct {
	s         *Server
	proxy     *httputil.ReverseProxy
	errw      *connect.ErrorWriter
	forwarded prometheus.Counter
	// floor is the highest index the leader answered a forwarded call at
	// (read_your_writes.go).
	floor readFloor

	mu sync.Mutex
	// refused is the leader address a forward last failed to connect to,
	// and refusedAt when; cleared by a response from it. Guarded by mu.
	refused   string
	refusedAt time.Time
}

// forwardKey carries a forward's attempt through the proxy to proxyError.
type forwardKey struct{}

// forwardAttempt is one try at forwarding a request.
type forwardAttempt struct {
	// addr is where the leader is called (its peer address, or its API
	// address); api its client API address, which clients are told.
	addr, api string
	// body is the request body as the proxy reads it.
	body *trackedBody
	// mayRetry lets proxyError leave a connection failure unanswered
	// (setting unsent) when nothing of the request was read, so that the
	// request can go to another leader.
	mayRetry bool
	unsent   bool
}

// trackedBody records whether a request body was read at all: a forward
// that failed before reading it sent nothing and can be repeated.
type trackedBody struct {
	io.ReadCloser
	read atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

func newForwarder(s *Server) *forwarder {
	fw := &forwarder{s: s, errw: connect.NewErrorWriter(), forwarded: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logd_forwarded_requests_total", Help: "Write requests this node forwarded to the leader.",
	})}
	s.reg.MustRegister(fw.forwarded)
	// HTTP/2 to the leader carries every protocol, gRPC's trailers
	// included: cleartext, or over TLS under peer TLS.
	transport := s.peerHTTP.Transport(forwardDialTimeout, true)
	transport.MaxIdleConnsPerHost = 64
	fw.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			addr := pr.In.Context().Value(forwardKey{}).(*forwardAttempt).addr
			pr.Out.URL.Scheme = s.peerHTTP.Scheme()
			pr.Out.URL.Host = addr
			pr.Out.Host = addr
			pr.Out.Header.Set(ForwardedHeader, s.b.NodeID())
			// The node behind the caller's certificate, for the leader's
			// check of a forwarded Join (join.go); never what a caller
			// wrote.
			pr.Out.Header.Del(ForwardedNodeHeader)
			if id, ok := s.peerTLS.VerifiedNode(pr.In.TLS); ok {
				pr.Out.Header.Set(ForwardedNodeHeader, id)
			}
			forwardAuthHeaders(pr.In, pr.Out.Header)
			if deadline, ok := pr.In.Context().Deadline(); ok {
				setCallTimeout(pr.Out.Header, time.Until(deadline))
			}
		},
		Transport: transport,
		// Stream responses as they come (long polls, server streams).
		FlushInterval: -1,
		ErrorHandler:  fw.proxyError,
		ModifyResponse: func(resp *http.Response) error {
			// This node set the request id header already (request_id.go);
			// the leader echoes the same id.
			resp.Header.Del(RequestIDHeader)
			fw.floor.noteAcked(resp.Header)
			noteWritten(fw.s.b, resp.Header)
			noteGroupsApplied(fw.s.b, resp.Header)
			fw.reached(resp.Request.URL.Host)
			return nil
		},
	}
	return fw
}

const (
	// forwardDialTimeout bounds connecting to the leader; a failure to
	// connect proves the request was not sent, so it is answered
	// NOT_LEADER (or tried on a new leader).
	forwardDialTimeout = 2 * time.Second
	// leaderWait bounds how long a write waits for a leader it can
	// forward to, and a call for this node to be ready (server.go): about
	// what an election takes with replication's default timeouts
	// (replication/raft_stores.go), so a call arriving at its start is
	// answered at its end. A cluster without a quorum gets no leader:
	// calls then fail after this wait, not at once, but not after their
	// whole deadline either.
	leaderWait = time.Second
	// refusedFor is how long a leader address that refused a connection
	// is not forwarded to again without waiting for another leader first:
	// longer than an election.
	refusedFor = 2 * time.Second
	// waitPoll is how often a waiting call looks at the node's state.
	waitPoll = 5 * time.Millisecond
)

// wrap returns next behind the forwarder.
func (fw *forwarder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/"+logdv1connect.LogServiceName+"/") {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == logdv1connect.LogServiceJoinProcedure && r.TLS != nil {
			// Join's handler names the node behind the connection.
			r = r.WithContext(context.WithValue(r.Context(), connStateKey{}, r.TLS))
		}
		if m := fw.s.membersHeader(); m != "" {
			w.Header().Set(MembersHeader, m)
		}
		if r.Header.Get(ForwardedHeader) != "" {
			// Served here, never forwarded again; the answer tells the
			// forwarding node what its reads must wait for
			// (read_your_writes.go, appliedIndexInterceptor).
			next.ServeHTTP(w, r)
			return
		}
		if localProcedures[r.URL.Path] || fw.s.b.IsLeader() || routedGroupProcedures[r.URL.Path] && fw.s.b.RoutesGroups() {
			next.ServeHTTP(w, r)
			return
		}
		if !fw.authorizeForward(w, r) {
			return
		}
		fw.forward(w, r, next)
	})
}

// forward sends a write to the leader, waiting for one first if needed
// (see the top of this file), or serves it with next when this node is
// the leader by then, or when no leader is known after the wait (the
// handler answers NOT_LEADER, which is safe to retry).
func (fw *forwarder) forward(w http.ResponseWriter, r *http.Request, next http.Handler) {
	// The caller's deadline bounds the waits. The handler reads it from
	// the same header, but nothing has read it yet, and over HTTP/1.1 a
	// caller that hangs up is not noticed before its body is read.
	if timeout, ok := callTimeout(r.Header); ok {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	body := &trackedBody{ReadCloser: r.Body}
	r.Body = body
	for try := 1; ; try++ {
		addr, api := fw.awaitLeader(r.Context())
		if addr == "" {
			next.ServeHTTP(w, r)
			return
		}
		fw.forwarded.Inc()
		at := &forwardAttempt{addr: addr, api: api, body: body, mayRetry: try == 1}
		fw.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardKey{}, at)))
		if !at.unsent {
			return
		}
	}
}

// awaitLeader returns the address to forward a write to, the leader's
// call address, once one is known that is not this node and has not
// refused a connection lately, with the leader's client API address;
// "" when this node leads. It waits at most leaderWait and while ctx
// lasts, then returns what it knows ("" if nothing).
func (fw *forwarder) awaitLeader(ctx context.Context) (addr, api string) {
	usable := func() bool {
		if fw.s.b.IsLeader() {
			addr, api = "", ""
			return true
		}
		var id string
		addr, id = fw.s.b.LeaderCallAddress()
		api, _ = fw.s.b.LeaderAPIAddress()
		if id == fw.s.b.NodeID() {
			addr = "" // itself, by a view already stale: not a leader to go to
		}
		return addr != "" && !fw.refusedLately(addr)
	}
	waitUntil(ctx, leaderWait, usable)
	return addr, api
}

// The headers that carry a call's timeout: Connect's, in milliseconds,
// and gRPC's (also gRPC-Web's), a number and a unit.
const (
	connectTimeoutHeader = "Connect-Timeout-Ms"
	grpcTimeoutHeader    = "Grpc-Timeout"
)

var grpcTimeoutUnits = map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second,
	'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}

// callTimeout returns the timeout a call's headers give; false when they
// give none, or none that can be read.
func callTimeout(h http.Header) (time.Duration, bool) {
	if v := h.Get(connectTimeoutHeader); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, false
		}
		return time.Duration(ms) * time.Millisecond, true
	}
	if v := h.Get(grpcTimeoutHeader); len(v) >= 2 {
		unit, ok := grpcTimeoutUnits[v[len(v)-1]]
		n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
		if !ok || err != nil || n < 0 || n > math.MaxInt64/int64(unit) {
			return 0, false
		}
		return time.Duration(n) * unit, true
	}
	return 0, false
}

// setCallTimeout rewrites the timeout header a forwarded call carries to
// what is left of it after waiting here, so the leader gives up when the
// caller does.
func setCallTimeout(h http.Header, left time.Duration) {
	ms := max(left.Milliseconds(), 1)
	if h.Get(connectTimeoutHeader) != "" {
		h.Set(connectTimeoutHeader, strconv.FormatInt(ms, 10))
	}
	if h.Get(grpcTimeoutHeader) != "" {
		// gRPC allows at most 8 digits.
		if ms < 1e8 {
			h.Set(grpcTimeoutHeader, strconv.FormatInt(ms, 10)+"m")
		} else {
			h.Set(grpcTimeoutHeader, strconv.FormatInt(min(ms/1000, 1e8-1), 10)+"S")
		}
	}
}

// refusedLately reports whether a forward to addr failed to connect less
// than refusedFor ago.
func (fw *forwarder) refusedLately(addr string) bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.refused == addr && time.Since(fw.refusedAt) < refusedFor
}

// reached notes a response from addr.
func (fw *forwarder) reached(addr string) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.refused == addr {
		fw.refused = ""
	}
}

// waitUntil polls cond every waitPoll until it holds, bound passes or ctx
// ends, and reports whether it held.
func waitUntil(ctx context.Context, bound time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return cond()
		case <-deadline.C:
			return cond()
		case <-tick.C:
			if cond() {
				return true
			}
		}
	}
}

// proxyError answers a request that could not be forwarded. A failed
// connection means nothing was sent: NOT_LEADER with the leader's address,
// which clients retry there. A failure after sending leaves the outcome
// unknown: UNAVAILABLE.
func (fw *forwarder) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	at := r.Context().Value(forwardKey{}).(*forwardAttempt)
	addr := at.addr
	// Clients are told the leader's client API address, never its peer
	// address.
	hint := at.api
	var op *net.OpError
	var cerr error
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		// A dial the caller's going away cut short says nothing of the
		// leader.
		if r.Context().Err() == nil {
			fw.mu.Lock()
			fw.refused, fw.refusedAt = addr, time.Now()
			fw.mu.Unlock()
			if at.mayRetry && !at.body.read.Load() {
				at.unsent = true // forward tries again, to a new leader
				return
			}
		}
		cerr = withInfo(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER, LeaderAddress: hint},
			fmt.Errorf("not the leader, and the leader at %s is unreachable: %w", addr, err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		cerr = withInfo(connect.CodeDeadlineExceeded, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAVAILABLE},
			fmt.Errorf("forwarded to the leader at %s; outcome unknown: %w", addr, err))
	default:
		cerr = withInfo(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAVAILABLE},
			fmt.Errorf("forwarding to the leader at %s failed; outcome unknown: %w", addr, err))
	}
	if fw.errw.IsSupported(r) {
		fw.errw.Write(w, r, cerr)
		return
	}
	http.Error(w, cerr.Error(), http.StatusBadGateway)
}

// membersHeader lists the registered API addresses.
func (s *Server) membersHeader() string {
	return strings.Join(s.b.MemberAPIAddresses(), ",")
}

// leaderHintInterceptor adds the leader's API address to NOT_LEADER errors
// that lack it, so a client can go there directly.
func (s *Server) leaderHintInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			if err == nil {
				return resp, nil
			}
			return resp, s.leaderHint(err)
		}
	}
}

// leaderHint adds the leader's API address to a NOT_LEADER error that
// lacks it; it returns any other error as it is.
func (s *Server) leaderHint(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		info, ok := v.(*logdv1.ErrorInfo)
		if !ok || info.Reason != logdv1.Reason_REASON_NOT_LEADER || info.LeaderAddress != "" {
			continue
		}
		addr, _ := s.b.LeaderAPIAddress()
		if addr == "" || addr == s.b.APIAddress() {
			return err
		}
		info.LeaderAddress = addr
		return withInfo(ce.Code(), info, errors.New(ce.Message()))
	}
	return err
}
