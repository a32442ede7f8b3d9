package peer

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
)

// Peer routes: where this node dials each peer. Without routes a node
// dials the addresses peers advertise (the Raft configuration's address,
// the node registry's peer address, else its API address: a node that
// serves node-to-node HTTP on a listener of its own, --peer-listen,
// registers that listener's address, fsm.RegisteredNode.CallAddress).
// With a route, it dials the route's address instead, so a test can put
// a proxy of its own between every ordered pair of nodes and cut, slow or
// drop one direction of one link (cmd/logd's nemesis tests, package
// internal/nemesis). Every node-to-node dial goes through one Resolver:
// Raft's transport (its raft.ServerAddressProvider, package
// replication/transport), forwarding of writes to the leader and the
// leader's wait for a joining node (package server), segment catch-up
// (replication.SegmentClient), the leader's check that a joining node's
// Raft port answers and cmd/logd's join request.

// Route is where this node dials one peer; an empty field dials the
// peer's advertised address.
type Route struct {
	// Raft is the address dialed for the peer's Raft transport.
	Raft string
	// API is the address dialed for the peer's HTTP: its client API, and
	// its peer listener when it registered one.
	API string
}

// Routes maps peer node ids to routes.
type Routes map[string]Route

// ParseRoutes parses routes written as comma-separated ID/KIND=ADDR
// entries, KIND raft or api, for example
// "n2/raft=127.0.0.1:9001,n2/api=127.0.0.1:9002". An empty string is no
// routes. A malformed entry is an error that names it.
func ParseRoutes(s string) (Routes, error) {
	out := Routes{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, entry := range strings.Split(s, ",") {
		key, addr, ok := strings.Cut(strings.TrimSpace(entry), "=")
		i := strings.LastIndex(key, "/")
		if !ok || i <= 0 || addr == "" {
			return nil, fmt.Errorf("peer route %q: want ID/raft=ADDR or ID/api=ADDR", entry)
		}
		id, kind := key[:i], key[i+1:]
		r := out[id]
		switch kind {
		case "raft":
			r.Raft = addr
		case "api":
			r.API = addr
		default:
			return nil, fmt.Errorf("peer route %q: kind %q is neither raft nor api", entry, kind)
		}
		out[id] = r
	}
	return out, nil
}

// String writes routes in the form ParseRoutes reads, sorted by id.
func (r Routes) String() string {
	ids := make([]string, 0, len(r))
	for id := range r {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var parts []string
	for _, id := range ids {
		if a := r[id].Raft; a != "" {
			parts = append(parts, id+"/raft="+a)
		}
		if a := r[id].API; a != "" {
			parts = append(parts, id+"/api="+a)
		}
	}
	return strings.Join(parts, ",")
}

// Resolver maps peers to the addresses this node dials. A nil
// *Resolver, or one without routes, maps every address to itself.
// Methods are safe for concurrent use.
type Resolver struct {
	routes Routes
	// registry finds the node id behind a registered API address; Attach
	// sets it.
	registry atomic.Pointer[func(addr string) (id string, ok bool)]
}

// NewResolver returns a resolver over routes, which it does not copy
// (the caller must not change them).
func NewResolver(routes Routes) *Resolver {
	return &Resolver{routes: routes}
}

// Attach makes registry, safe for concurrent use, the source of API
// address to node id lookups: the node registered at addr (its client API
// address or its peer address), ok false for none. replication.Open
// attaches its node registry before Raft starts; nil r does nothing.
func (r *Resolver) Attach(registry func(addr string) (id string, ok bool)) {
	if r != nil {
		r.registry.Store(&registry)
	}
}

// Routes returns the routes r was made with, which the caller must not
// change; nil for a nil r.
func (r *Resolver) Routes() Routes {
	if r == nil {
		return nil
	}
	return r.routes
}

// API returns the address to dial for the HTTP of a peer registered at
// addr (its client API address or its peer address): its route's API
// address, or addr itself when no registered node has that address or
// its node has no API route (a node still joining is not registered yet,
// and is dialed directly).
func (r *Resolver) API(addr string) string {
	if r == nil || len(r.routes) == 0 {
		return addr
	}
	f := r.registry.Load()
	if f == nil {
		return addr
	}
	if id, ok := (*f)(addr); ok {
		if route := r.routes[id].API; route != "" {
			return route
		}
		return addr
	}
	return addr
}

// Raft returns the address to dial for the Raft transport of peer id,
// configured at addr: its route's Raft address, or addr without one.
func (r *Resolver) Raft(id, addr string) string {
	if r == nil {
		return addr
	}
	if route := r.routes[id].Raft; route != "" {
		return route
	}
	return addr
}
