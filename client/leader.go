package client

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
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
// A member whose connection was refused in the last refusedFor is passed
// over, both by the move to the next member and by a NOT_LEADER that names
// it: in a failover a follower names the dead leader until it gives up on
// it, and the client then stays with the follower, which holds the next
// attempt until a new leader is elected (server/forward.go), instead of
// going back to the dead node.
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
	// the seed first; refused when a connection to a host last failed
	// (until a response from it). Guarded by mu.
	current string
	known   []string
	refused map[string]time.Time
}

// refusedFor is how long a member that refused a connection is passed
// over: longer than an election, so a dead leader is not tried again
// before the cluster has a new one.
const refusedFor = 2 * time.Second

type directKey struct{}

// direct marks a context whose calls go to the URL's host as given (for
// calls addressed to one member, like ClusterStatus).
func direct(ctx context.Context) context.Context { return context.WithValue(ctx, directKey{}, true) }

func newRouter(next http.RoundTripper, seedHost string) *router {
	if next == nil {
		next = http.DefaultTransport
	}
	return &router{next: next, current: seedHost, known: []string{seedHost}, refused: map[string]time.Time{}}
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
		r.learn(req.URL.Host, resp.Header.Get(membersHeader))
	}
	return resp, err
}

// target is the host calls go to now.
func (r *router) target() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// learn notes a response from host, with the members' addresses it
// listed (comma-separated).
func (r *router) learn(host, members string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refused) > 0 {
		delete(r.refused, host)
	}
	if members == "" {
		return
	}
	for _, a := range strings.Split(members, ",") {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(r.known, a) {
			r.known = append(r.known, a)
		}
	}
}

// observe moves the client after a failed attempt against host.
func (r *router) observe(host string, err error) {
	if errors.Is(err, ErrTokenSource) || tlsFailed(err) {
		// Never sent, or a certificate refused: another member shares
		// the cluster's CA and would answer the same.
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if notSent(err) {
		r.refused[host] = now
	}
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl) && nl.LeaderAddress != "":
		if r.refusedLately(nl.LeaderAddress, now) {
			return // stay: host waits for the next leader
		}
		r.current = nl.LeaderAddress
		if !slices.Contains(r.known, nl.LeaderAddress) {
			r.known = append(r.known, nl.LeaderAddress)
		}
	case connLost(err), errors.Is(err, ErrUnavailable):
		// Only the first of several concurrent failures moves the client.
		if r.current != host || len(r.known) < 2 {
			return
		}
		// The next member that has not refused a connection lately, else
		// simply the next one.
		i := slices.Index(r.known, host)
		r.current = r.known[(i+1)%len(r.known)]
		for k := 1; k < len(r.known); k++ {
			if next := r.known[(i+k)%len(r.known)]; !r.refusedLately(next, now) {
				r.current = next
				break
			}
		}
	}
}

// refusedLately reports whether host refused a connection less than
// refusedFor before now. Call with mu held.
func (r *router) refusedLately(host string, now time.Time) bool {
	at, ok := r.refused[host]
	return ok && now.Sub(at) < refusedFor
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
