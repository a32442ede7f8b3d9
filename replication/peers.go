package replication

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/logd-dev/logd/replication/fsm"
)

// Peer routes: where this node dials each peer. Without routes a node
// dials the addresses peers advertise (the Raft configuration's address,
// the node registry's peer address, else its API address: a node that
// serves node-to-node HTTP on a listener of its own, --peer-listen,
// registers that listener's address, fsm.RegisteredNode.CallAddress). With a route, it dials the route's
// address instead, so a test can put a proxy of its own between every
// ordered pair of nodes and cut, slow or drop one direction of one link
// (cmd/logd's nemesis tests, package internal/nemesis). Every node-to-node
// dial goes through one PeerResolver: Raft's transport (as its
// raft.ServerAddressProvider, raft_routes.go), forwarding of writes to the leader and the
// leader's wait for a joining node (package server), segment catch-up
// (SegmentClient), the leader's check that a joining node's Raft port
// answers (dialRaft) and cmd/logd's join request.

// PeerRoute is where this node dials one peer; an empty field dials the
// peer's advertised address.
type PeerRoute struct {
	// Raft is the address dialed for the peer's Raft transport.
	Raft string
	// API is the address dialed for the peer's HTTP: its client API, and
	// its peer listener when it registered one.
	API string
}

// PeerRoutes maps peer node ids to routes.
type PeerRoutes map[string]PeerRoute

// ParsePeerRoutes parses routes written as comma-separated ID/KIND=ADDR
// entries, KIND raft or api, for example
// "n2/raft=127.0.0.1:9001,n2/api=127.0.0.1:9002". An empty string is no
// routes. A malformed entry is an ErrInvalidArgument.
func ParsePeerRoutes(s string) (PeerRoutes, error) {
	out := PeerRoutes{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, entry := range strings.Split(s, ",") {
		key, addr, ok := strings.Cut(strings.TrimSpace(entry), "=")
		i := strings.LastIndex(key, "/")
		if !ok || i <= 0 || addr == "" {
			return nil, fmt.Errorf("%w: peer route %q: want ID/raft=ADDR or ID/api=ADDR", ErrInvalidArgument, entry)
		}
		id, kind := key[:i], key[i+1:]
		r := out[id]
		switch kind {
		case "raft":
			r.Raft = addr
		case "api":
			r.API = addr
		default:
			return nil, fmt.Errorf("%w: peer route %q: kind %q is neither raft nor api", ErrInvalidArgument, entry, kind)
		}
		out[id] = r
	}
	return out, nil
}

// String writes routes in the form ParsePeerRoutes reads, sorted by id.
func (r PeerRoutes) String() string {
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

// PeerResolver maps peers to the addresses this node dials. A nil
// *PeerResolver, or one without routes, maps every address to itself.
// Methods are safe for concurrent use.
type PeerResolver struct {
	routes PeerRoutes
	// registry finds the node id behind a registered API address; Open
	// sets it once to its state machine's node registry.
	registry atomic.Pointer[fsm.FSM]
}

// NewPeerResolver returns a resolver over routes, which it does not copy
// (the caller must not change them).
func NewPeerResolver(routes PeerRoutes) *PeerResolver {
	return &PeerResolver{routes: routes}
}

// attach makes the node registry of f the source of API address to node
// id lookups. Open calls it before Raft starts.
func (r *PeerResolver) attach(f *fsm.FSM) {
	if r != nil {
		r.registry.Store(f)
	}
}

// API returns the address to dial for the HTTP of a peer registered at
// addr (its client API address or its peer address): its route's API
// address, or addr itself when no registered node has that address or
// its node has no API route (a node still joining is not registered yet,
// and is dialed directly).
func (r *PeerResolver) API(addr string) string {
	if r == nil || len(r.routes) == 0 {
		return addr
	}
	f := r.registry.Load()
	if f == nil {
		return addr
	}
	for _, n := range f.Nodes() {
		if n.APIAddress == addr || n.PeerAddress != "" && n.PeerAddress == addr {
			if route := r.routes[n.ID].API; route != "" {
				return route
			}
			return addr
		}
	}
	return addr
}

// Raft returns the address to dial for the Raft transport of peer id,
// configured at addr: its route's Raft address, or addr without one.
func (r *PeerResolver) Raft(id, addr string) string {
	if r == nil {
		return addr
	}
	if route := r.routes[id].Raft; route != "" {
		return route
	}
	return addr
}
