package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// Client talks to one logd node over its Connect API. It is safe for
// concurrent use. Any node accepts any call: the server forwards writes to
// the Raft leader and serves reads from its applied state.
type Client struct {
	baseURL string
	opts    Options // defaults applied
	rpc     logdv1connect.LogServiceClient
	// ownHTTP is the HTTP client New created, closed by Close; nil when the
	// caller supplied one.
	ownHTTP *http.Client
	// router sends calls to the current node and follows the cluster
	// (leader.go).
	router *router
	// hc is the routed HTTP client (router as its transport).
	hc *http.Client
	// scheme is the base URL's, "http" or "https": every member is
	// reached the same way.
	scheme string
	// connectOpts are the options of every Connect client it makes (the
	// bearer token's interceptor).
	connectOpts []connect.ClientOption
}

// New returns a client of the node at server, which is "host:port" (plain
// HTTP, or HTTPS when Options.TLS is set) or an http:// or https:// URL,
// possibly with a path prefix. New starts nothing and does not contact
// the server.
func New(server string, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("client options: %w", err)
	}
	base, err := ParseServer(server)
	if err != nil {
		return nil, err
	}
	if opts.TLS != nil && strings.HasPrefix(base, "http://") {
		if strings.Contains(server, "://") {
			return nil, fmt.Errorf("server address %q: TLS options given for an http:// URL (use https://)", server)
		}
		base = "https://" + strings.TrimPrefix(base, "http://")
	}
	opts = opts.withDefaults()
	c := &Client{baseURL: base, opts: opts}
	hc := opts.HTTPClient
	if hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Benchmarks and multi-partition consumers keep many calls in
		// flight to one node; keep their connections alive.
		t.MaxIdleConnsPerHost = 64
		if opts.TLS != nil {
			t.TLSClientConfig = opts.TLS.Clone()
			// A transport with its own TLS config offers HTTP/2 only
			// when asked to (the clone of the default transport does
			// ask; say so here, where it matters).
			t.ForceAttemptHTTP2 = true
		}
		hc = &http.Client{Transport: t}
		c.ownHTTP = hc
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("server address %q: %w", server, err)
	}
	c.scheme = u.Scheme
	c.router = newRouter(hc.Transport, u.Host)
	routed := *hc
	routed.Transport = c.router
	c.hc = &routed
	if src := opts.tokenSource(); src != nil {
		c.connectOpts = append(c.connectOpts, connect.WithInterceptors(bearer(src)))
	}
	if opts.ConsistentReads {
		c.connectOpts = append(c.connectOpts, connect.WithInterceptors(consistentReads()))
	}
	c.rpc = logdv1connect.NewLogServiceClient(c.hc, base, c.connectOpts...)
	return c, nil
}

// Server returns the base URL the client calls.
func (c *Client) Server() string { return c.baseURL }

// Close releases the client's idle connections. Calls in flight are not
// interrupted; cancel their contexts for that. Close is idempotent.
func (c *Client) Close() error {
	if c.ownHTTP != nil {
		c.ownHTTP.CloseIdleConnections()
	}
	return nil
}

// ParseServer turns a server address into the base URL of its API:
// "host:port" becomes "http://host:port"; an http:// or https:// URL is
// kept, without a trailing slash. An empty host in "host:port" means
// 127.0.0.1.
func ParseServer(server string) (string, error) {
	s := strings.TrimSpace(server)
	if s == "" {
		return "", fmt.Errorf("server address is empty")
	}
	if !strings.Contains(s, "://") {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return "", fmt.Errorf("server address %q: want host:port or an http(s) URL: %w", server, err)
		}
		if port == "" {
			return "", fmt.Errorf("server address %q: missing port", server)
		}
		if host == "" {
			host = "127.0.0.1"
		}
		return "http://" + net.JoinHostPort(host, port), nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("server address %q: %w", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("server address %q: scheme %q is not http or https", server, u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("server address %q: missing host", server)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("server address %q: must not carry user info, a query or a fragment", server)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"), nil
}

// msToTime converts server milliseconds to a time; 0 is the zero Time.
func msToTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// timeToMs converts a time to server milliseconds; the zero Time is 0.
func timeToMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// consistentReadHeader asks a node for a linearizable read (the server's
// ConsistentReadHeader); writes ignore it.
const consistentReadHeader = "Logd-Consistent-Read"

// consistentReads sets consistentReadHeader on every unary call.
func consistentReads() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set(consistentReadHeader, "true")
			return next(ctx, req)
		}
	}
}
