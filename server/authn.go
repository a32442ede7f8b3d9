package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/quota"
)

// Authentication (docs/security.md, "Principals"). Every call to the API,
// /metrics, /healthz and /readyz is authenticated here, before it is
// forwarded or decoded: a bearer token first, else a verified client
// certificate, else the call is anonymous. A credential that does not
// check (a malformed, unknown, expired or revoked token) refuses the call
// with UNAUTHENTICATED even when a certificate would have done: a client
// that sends a credential means it. With AuthOptions.Required an
// anonymous call is refused too; without it nothing is refused for want
// of credentials, but a credential given still names the principal (so
// WhoAmI shows it, and the audit log records it).
//
// A write a follower forwards is the same HTTP request: a bearer token
// travels in its Authorization header and the leader checks it again.
// Principals the leader cannot check itself (a certificate's, or this
// node's bootstrap token's) travel in ForwardedPrincipalHeader, which a
// node honours only from a connection that presented a verified node
// certificate (peer mTLS) of a member of the cluster; from anyone else the
// header is dropped.

// The authentication methods, as WhoAmI and the audit log name them.
const (
	methodNone        = "none"
	methodToken       = "token"
	methodCertificate = "certificate"
	methodBootstrap   = "bootstrap-token"
)

// Forwarding headers a node sets on a write it forwards (forward.go), and
// honours only from a peer with a verified node certificate.
const (
	// ForwardedPrincipalHeader carries "<method> <principal>" of a call
	// authenticated by a certificate or the bootstrap token.
	ForwardedPrincipalHeader = "Logd-Forwarded-Principal"
	// ForwardedForHeader carries the client's address, for the audit log.
	ForwardedForHeader = "Logd-Forwarded-For"
)

// BootstrapPrincipal is the principal of the bootstrap token: a superuser
// on the node that was given the token.
var BootstrapPrincipal = auth.User("admin")

// AuthOptions configures authentication, authorization, the audit log and
// quotas (docs/security.md). The zero value is `--auth none` with no
// quotas and the audit log on Options.Logger.
type AuthOptions struct {
	// Required refuses calls without a principal (UNAUTHENTICATED) and
	// checks every call against the ACLs (authz.go). Without it nothing is
	// checked and every call is allowed.
	Required bool
	// Superusers bypass the ACLs.
	Superusers []auth.Principal
	// BootstrapToken, if set, authenticates as BootstrapPrincipal, a
	// superuser on this node. It is compared in constant time; it is not
	// replicated.
	BootstrapToken *auth.Token
	// MetricsPublic serves /metrics, /healthz and /readyz to anyone even
	// with Required; otherwise they need describe on the cluster.
	MetricsPublic bool
	// Audit receives one line per admin action (audit.go); nil logs them
	// on Options.Logger.
	Audit *slog.Logger
	// Quotas bound each principal's produce and fetch bytes per second
	// (quota.go). The zero value bounds nothing.
	Quotas quota.Rates
	// Now is the clock of token expiry and quota buckets; default
	// time.Now.
	Now func() time.Time
}

// authInfo is how a call was authenticated; the context carries it
// (authFrom).
type authInfo struct {
	principal auth.Principal
	// method is one of the method* names.
	method    string
	superuser bool
	// remote is the client's address: the connection's, or for a write
	// forwarded by a trusted node, the one that node received it from.
	remote string
	// forwardedBy is the id of the node that forwarded the call, when it
	// presented its node certificate.
	forwardedBy string
	// client is the kind of client that says it made the call (the
	// ClientHeader), when it names one of knownClients; else empty.
	client string
}

// ClientHeader names the kind of client making a call; the web console
// (console/assets/api.js) sends "console" on every call. It is the
// caller's claim, not a credential: the audit log records it beside the
// principal, and nothing is allowed or refused by it.
const ClientHeader = "X-Logd-Client"

// knownClients are the ClientHeader values recorded; others are dropped,
// so a caller cannot write arbitrary text into the audit log.
var knownClients = map[string]bool{"console": true}

// clientOf reads the ClientHeader of r.
func clientOf(r *http.Request) string {
	if c := r.Header.Get(ClientHeader); knownClients[c] {
		return c
	}
	return ""
}

type authKey struct{}

// authFrom returns the call's authentication; an anonymous one when the
// call did not pass through the authenticator.
func authFrom(ctx context.Context) *authInfo {
	if a, ok := ctx.Value(authKey{}).(*authInfo); ok {
		return a
	}
	return &authInfo{principal: auth.Anonymous, method: methodNone}
}

// authenticated reports whether the call has a principal.
func (a *authInfo) authenticated() bool { return a.method != methodNone }

// authenticator turns requests into principals.
type authenticator struct {
	opts AuthOptions
	sec  backend.SecurityAPI
	// authz names the superusers (the decision is the Server's).
	authz *auth.Authorizer
	// bootstrapSum is the SHA-256 of the bootstrap token's secret.
	bootstrapSum []byte
	errw         *connect.ErrorWriter
	// onRefused, if set, hears of calls refused before they were decoded
	// (the audit log of admin procedures, audit.go).
	onRefused func(r *http.Request, info *authInfo, err error)
	// isMember reports whether a node id is in the Raft configuration.
	isMember func(id string) bool
	// verifiedNode returns the node id of a connection's certificate when
	// the cluster CA signed it (peer.TLS.VerifiedNode); a node URI SAN in
	// a certificate of any other CA the API port trusts for clients names
	// no node.
	verifiedNode func(*tls.ConnectionState) (string, bool)
	// unauthenticated counts those refusals.
	unauthenticated prometheus.Counter
}

func newAuthenticator(opts AuthOptions, sec backend.SecurityAPI, authz *auth.Authorizer, reg *prometheus.Registry) *authenticator {
	a := &authenticator{opts: opts, sec: sec, authz: authz, errw: connect.NewErrorWriter(),
		unauthenticated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logd_unauthenticated_requests_total", Help: "API calls refused for want of valid credentials (UNAUTHENTICATED) before they were decoded.",
		})}
	reg.MustRegister(a.unauthenticated)
	if t := opts.BootstrapToken; t != nil {
		sum := sha256.Sum256([]byte(t.Secret))
		a.bootstrapSum = sum[:]
	}
	return a
}

// errUnauthenticated is the refusal of a call without valid credentials.
func errUnauthenticated(format string, args ...any) error {
	return withInfo(connect.CodeUnauthenticated, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAUTHENTICATED}, fmt.Errorf(format, args...))
}

// authenticate reads a request's credentials. It drops forwarding headers
// r may not set, so nothing after it sees them.
func (a *authenticator) authenticate(r *http.Request) (*authInfo, error) {
	info := &authInfo{principal: auth.Anonymous, method: methodNone, remote: r.RemoteAddr, client: clientOf(r)}
	if node, ok := a.verifiedNode(r.TLS); ok && r.Header.Get(ForwardedHeader) != "" && a.isMember(node) {
		if fp := r.Header.Get(ForwardedPrincipalHeader); fp != "" {
			method, ps, _ := strings.Cut(fp, " ")
			p, err := auth.ParsePrincipal(ps)
			if err != nil || (method != methodCertificate && method != methodBootstrap) {
				return nil, errUnauthenticated("node %s forwarded a call with a malformed principal %q", node, fp)
			}
			info.principal, info.method, info.forwardedBy = p, method, node
			info.superuser = method == methodBootstrap || a.authz.Superuser(p)
			if ff := r.Header.Get(ForwardedForHeader); ff != "" {
				info.remote = ff
			}
			return info, nil
		}
		info.forwardedBy = node
		if ff := r.Header.Get(ForwardedForHeader); ff != "" {
			info.remote = ff
		}
	} else {
		// Not from a member: whoever set these is not to be believed.
		r.Header.Del(ForwardedPrincipalHeader)
		r.Header.Del(ForwardedForHeader)
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return nil, errUnauthenticated("unsupported authorization scheme %q: send \"Bearer logd_<id>.<secret>\"", scheme)
		}
		tok, err := auth.ParseToken(strings.TrimSpace(cred))
		if err != nil {
			return nil, errUnauthenticated("bearer token: %v", err)
		}
		if a.isBootstrap(tok) {
			info.principal, info.method, info.superuser = BootstrapPrincipal, methodBootstrap, true
			return info, nil
		}
		v, ok := a.sec.Token(tok.ID)
		if !ok || !v.Check(tok, a.now().UnixMilli()) {
			return nil, errUnauthenticated("token %s is invalid, expired or revoked", tok.ID)
		}
		p, err := auth.ParsePrincipal(v.Principal)
		if err != nil {
			return nil, errUnauthenticated("token %s: %v", tok.ID, err)
		}
		info.principal, info.method, info.superuser = p, methodToken, a.authz.Superuser(p)
		return info, nil
	}
	if cert := verifiedLeaf(r); cert != nil {
		p, ok := certid.Principal(cert)
		if !ok {
			return nil, errUnauthenticated("the client certificate names no principal (no logd://user/ or logd://node/ URI SAN, and no usable common name)")
		}
		if p.Type == auth.TypeNode {
			if id, ok := a.verifiedNode(r.TLS); !ok || id != p.Name {
				return nil, errUnauthenticated("the client certificate claims node %s, but only the cluster CA's certificates name nodes", p.Name)
			}
		}
		info.principal, info.method, info.superuser = p, methodCertificate, a.authz.Superuser(p)
	}
	return info, nil
}

// isBootstrap reports whether tok is the bootstrap token, in time that
// does not depend on how much of its secret matches.
func (a *authenticator) isBootstrap(tok auth.Token) bool {
	if a.bootstrapSum == nil {
		return false
	}
	sum := sha256.Sum256([]byte(tok.Secret))
	return subtle.ConstantTimeCompare(sum[:], a.bootstrapSum) == 1 && tok.ID == a.opts.BootstrapToken.ID
}

func (a *authenticator) now() time.Time {
	if a.opts.Now != nil {
		return a.opts.Now()
	}
	return time.Now()
}

// verifiedLeaf returns the client certificate the TLS handshake verified,
// or nil.
func verifiedLeaf(r *http.Request) *x509.Certificate {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil
	}
	return r.TLS.VerifiedChains[0][0]
}

// wrap authenticates API calls before next (the forwarder and the Connect
// handler) sees them, and refuses those without valid credentials.
func (a *authenticator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, err := a.authenticate(r)
		if err == nil && a.opts.Required && !info.authenticated() {
			err = errUnauthenticated("authentication required: present a client certificate or a bearer token")
		}
		if err != nil {
			a.refused(r, info, err)
			a.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(withAuth(r.Context(), info)))
	})
}

// refused counts a refusal and tells onRefused of it.
func (a *authenticator) refused(r *http.Request, info *authInfo, err error) {
	a.unauthenticated.Inc()
	if a.onRefused != nil {
		if info == nil {
			info = &authInfo{principal: auth.Anonymous, method: methodNone, remote: r.RemoteAddr, client: clientOf(r)}
		}
		a.onRefused(r, info, err)
	}
}

// withAuth returns ctx carrying info, and its principal for the backend.
func withAuth(ctx context.Context, info *authInfo) context.Context {
	ctx = context.WithValue(ctx, authKey{}, info)
	if info.authenticated() {
		ctx = backend.WithPrincipal(ctx, info.principal)
	}
	return ctx
}

// writeError answers in the caller's protocol (Connect, gRPC, gRPC-Web),
// or with plain HTTP for anything else.
func (a *authenticator) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if a.errw.IsSupported(r) {
		a.errw.Write(w, r, err)
		return
	}
	status := http.StatusUnauthorized
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodePermissionDenied {
		status = http.StatusForbidden
	}
	http.Error(w, err.Error(), status)
}
