package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Authorizing a forwarded write on the follower. The forwarder proxies a
// write to the leader as the same HTTP request, undecoded; with
// AuthOptions.Required the follower first decodes it, as its own handler
// would, through a second Connect handler whose only interceptor applies
// the permission table (checkInterceptor) and never calls a handler. A
// refused write is answered here, in the caller's protocol, and never
// reaches the leader; an allowed one is forwarded from the body read for
// the check (bounded by the request limits like any body). The leader
// checks it again, for the same principal (authn.go): both nodes hold the
// same ACLs, up to replication lag, and the leader's are the newest.

// checkKey carries a check's result through the check handler.
type checkKey struct{}

// checkResult is what the check handler found.
type checkResult struct {
	// done: the request decoded and was checked; err is the refusal.
	done bool
	err  error
}

// errChecked ends a call in the check handler once it is checked.
var errChecked = errors.New("checked")

// checkInterceptor authorizes a decoded call and ends it.
func (s *Server) checkInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, ok := ctx.Value(checkKey{}).(*checkResult)
			if !ok {
				return nil, connect.NewError(connect.CodeInternal, errors.New("check handler called without a check"))
			}
			res.done = true
			res.err = s.authorize(ctx, req.Spec().Procedure, req.Any())
			if res.err != nil {
				if row := authzTable[req.Spec().Procedure]; row.audit != nil {
					if attrs, ok := row.audit(req.Any()); ok {
						s.auditLine(ctx, authFrom(ctx), req.Spec().Procedure, attrs, res.err)
					}
				}
			}
			return nil, errChecked
		}
	}
}

// authorizeForward checks a write before this node forwards it, and
// reports whether to forward it; when not, it has answered the caller.
// A request that does not decode is forwarded unchecked: the leader
// refuses it, for the same reason. So is every write while this node is
// not ready: its ACLs may be behind, and the leader's are not.
func (fw *forwarder) authorizeForward(w http.ResponseWriter, r *http.Request) bool {
	s := fw.s
	if !s.auth.Required || authFrom(r.Context()).superuser || s.check == nil || !s.b.Ready() {
		return true
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var ce *connect.Error
		if !errors.As(err, &ce) {
			err = withInfo(connect.CodeInvalidArgument, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_INVALID_ARGUMENT}, err)
		}
		fw.writeError(w, r, err)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	res := &checkResult{}
	cr := r.Clone(context.WithValue(r.Context(), checkKey{}, res))
	cr.Body = io.NopCloser(bytes.NewReader(body))
	s.check.ServeHTTP(discardResponse{h: http.Header{}}, cr)
	if res.err != nil {
		fw.writeError(w, r, res.err)
		return false
	}
	if !res.done {
		s.logger.DebugContext(r.Context(), "forwarding a write that did not decode for its check", "path", r.URL.Path)
	}
	return true
}

// writeError answers in the caller's protocol.
func (fw *forwarder) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if fw.errw.IsSupported(r) {
		_ = fw.errw.Write(w, r, err)
		return
	}
	http.Error(w, err.Error(), http.StatusForbidden)
}

// forwardAuthHeaders sets the headers that carry a forwarded call's
// principal to the leader (authn.go): a bearer token travels as it came,
// in the Authorization header; a certificate's or the bootstrap token's
// principal, which the leader cannot check itself, in
// ForwardedPrincipalHeader.
func forwardAuthHeaders(in *http.Request, out http.Header) {
	forwardPrincipal(in.Context(), out)
}

// forwardPrincipal sets the forwarding headers of the principal of the
// call ctx serves (forwardAuthHeaders), for a call this node makes to the
// leader on its caller's behalf (group_describe.go); the caller's bearer
// token, if any, is for that call to copy.
func forwardPrincipal(ctx context.Context, out http.Header) {
	info := authFrom(ctx)
	out.Del(ForwardedPrincipalHeader)
	if info.method == methodCertificate || info.method == methodBootstrap {
		out.Set(ForwardedPrincipalHeader, info.method+" "+info.principal.String())
	}
	out.Set(ForwardedForHeader, info.remote)
}

// isMember reports whether id is in the Raft configuration: a node
// certificate vouches for a forwarded principal only while its node is a
// member (a removed node's key no longer does).
func (s *Server) isMember(id string) bool {
	for _, m := range s.b.Status().Members {
		if m.ID == id {
			return true
		}
	}
	return false
}

// discardResponse is the check handler's response writer: its answer is
// not sent anywhere.
type discardResponse struct{ h http.Header }

func (d discardResponse) Header() http.Header         { return d.h }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}
func (d discardResponse) Flush()                      {}
