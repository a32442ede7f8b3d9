package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// Leader forwarding. Any node accepts any call: a write that reaches a
// follower is reverse-proxied, as the same HTTP request, to the leader's
// registered API address, so it works for every protocol (Connect, gRPC,
// gRPC-Web) and every write RPC without per-RPC code. Reads are served
// locally from applied state.
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

// ForwardedHeader marks a request forwarded by another node (its value is
// that node's id).
const ForwardedHeader = "Logd-Forwarded-By"

// MembersHeader, on every API response, lists the client API addresses of
// the cluster's registered nodes (comma-separated), so clients learn where
// to go when their node fails.
const MembersHeader = "Logd-Members"

// localProcedures are served by any node from its applied state.
var localProcedures = map[string]bool{
	logdv1connect.LogServiceFetchProcedure:              true,
	logdv1connect.LogServiceListTopicsProcedure:         true,
	logdv1connect.LogServiceDescribeTopicProcedure:      true,
	logdv1connect.LogServiceListOffsetsProcedure:        true,
	logdv1connect.LogServiceStatusProcedure:             true,
	logdv1connect.LogServiceGroupFetchProcedure:         true,
	logdv1connect.LogServiceListGroupsProcedure:         true,
	logdv1connect.LogServiceDescribeGroupProcedure:      true,
	logdv1connect.LogServiceDescribeQueueGroupProcedure: true,
}

// forwarder proxies write requests to the leader.
type forwarder struct {
	s         *Server
	proxy     *httputil.ReverseProxy
	errw      *connect.ErrorWriter
	forwarded prometheus.Counter
}

type leaderKey struct{}

func newForwarder(s *Server) *forwarder {
	fw := &forwarder{s: s, errw: connect.NewErrorWriter(), forwarded: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logd_forwarded_requests_total", Help: "Write requests this node forwarded to the leader.",
	})}
	s.reg.MustRegister(fw.forwarded)
	// Cleartext HTTP/2 to the leader carries every protocol, gRPC's
	// trailers included.
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	transport := &http.Transport{
		Protocols:           &protocols,
		DialContext:         (&net.Dialer{Timeout: forwardDialTimeout}).DialContext,
		MaxIdleConnsPerHost: 64,
	}
	fw.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			addr := pr.In.Context().Value(leaderKey{}).(string)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = addr
			pr.Out.Host = addr
			pr.Out.Header.Set(ForwardedHeader, s.b.NodeID())
		},
		Transport: transport,
		// Stream responses as they come (long polls, server streams).
		FlushInterval: -1,
		ErrorHandler:  fw.proxyError,
	}
	return fw
}

// forwardDialTimeout bounds connecting to the leader; a failure to connect
// proves the request was not sent, so it is answered NOT_LEADER.
const forwardDialTimeout = 2 * time.Second

// wrap returns next behind the forwarder.
func (fw *forwarder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/"+logdv1connect.LogServiceName+"/") {
			next.ServeHTTP(w, r)
			return
		}
		if m := fw.s.membersHeader(); m != "" {
			w.Header().Set(MembersHeader, m)
		}
		if localProcedures[r.URL.Path] || r.Header.Get(ForwardedHeader) != "" || fw.s.b.IsLeader() {
			next.ServeHTTP(w, r)
			return
		}
		addr, _ := fw.s.b.LeaderAPIAddress()
		if addr == "" || addr == fw.s.b.APIAddress() {
			// No leader known (or not registered yet): the handler answers
			// NOT_LEADER, which is safe to retry.
			next.ServeHTTP(w, r)
			return
		}
		fw.forwarded.Inc()
		fw.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), leaderKey{}, addr)))
	})
}

// proxyError answers a request that could not be forwarded. A failed
// connection means nothing was sent: NOT_LEADER with the leader's address,
// which clients retry there. A failure after sending leaves the outcome
// unknown: UNAVAILABLE.
func (fw *forwarder) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	addr, _ := r.Context().Value(leaderKey{}).(string)
	var op *net.OpError
	var cerr error
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		cerr = withInfo(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER, LeaderAddress: addr},
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
			var ce *connect.Error
			if !errors.As(err, &ce) {
				return resp, err
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
					return resp, err
				}
				info.LeaderAddress = addr
				return resp, withInfo(ce.Code(), info, errors.New(ce.Message()))
			}
			return resp, err
		}
	}
}
