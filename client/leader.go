package client

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Following the cluster. Any node accepts any call (followers forward
// writes to the leader), so a client sticks to one node and moves only
// when it must:
//
//   - a NOT_LEADER answer that names the leader's address (the node could
//     not forward) moves the client to the leader;
//   - a connection that fails, or a node that answers UNAVAILABLE, moves it
//     to the next known member.
//
// Members are learnt without extra calls: every API response carries the
// cluster's client addresses in the Logd-Members header. The move happens
// between attempts of the client's retry loop, so a retried call goes to
// the new node.

// membersHeader is server.MembersHeader (the client does not import the
// server).
const membersHeader = "Logd-Members"

// router rewrites each request's host to the node the client currently
// uses. It is the client's HTTP transport.
type router struct {
	next http.RoundTripper

	mu sync.Mutex
	// current is the host:port calls go to; known the members' host:port,
	// the seed first. Guarded by mu.
	current string
	known   []string
}

type directKey struct{}

// direct marks a context whose calls go to the URL's host as given (for
// calls addressed to one member, like ClusterStatus).
func direct(ctx context.Context) context.Context { return context.WithValue(ctx, directKey{}, true) }

func newRouter(next http.RoundTripper, seedHost string) *router {
	if next == nil {
		next = http.DefaultTransport
	}
	return &router{next: next, current: seedHost, known: []string{seedHost}}
}

// RoundTrip implements http.RoundTripper.
func (r *router) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Value(directKey{}) == nil {
		if host := r.target(); host != req.URL.Host {
			req = req.Clone(req.Context())
			req.URL.Host = host
			req.Host = host
		}
	}
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		if h := resp.Header.Get(membersHeader); h != "" {
			r.learn(strings.Split(h, ","))
		}
	}
	return resp, err
}

// target is the host calls go to now.
func (r *router) target() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// learn adds members' addresses.
func (r *router) learn(addrs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(r.known, a) {
			r.known = append(r.known, a)
		}
	}
}

// observe moves the client after a failed attempt against host.
func (r *router) observe(host string, err error) {
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl) && nl.LeaderAddress != "":
		r.mu.Lock()
		r.current = nl.LeaderAddress
		if !slices.Contains(r.known, nl.LeaderAddress) {
			r.known = append(r.known, nl.LeaderAddress)
		}
		r.mu.Unlock()
	case connLost(err), errors.Is(err, ErrUnavailable):
		r.mu.Lock()
		// Only the first of several concurrent failures moves the client.
		if r.current == host && len(r.known) > 1 {
			i := slices.Index(r.known, host)
			r.current = r.known[(i+1)%len(r.known)]
		}
		r.mu.Unlock()
	}
}

// Members returns the client addresses of the cluster's nodes that the
// client has learnt, the one it was created with first.
func (c *Client) Members() []string {
	c.router.mu.Lock()
	defer c.router.mu.Unlock()
	return slices.Clone(c.router.known)
}

// Current returns the address of the node the client's calls go to now.
func (c *Client) Current() string { return c.router.target() }
