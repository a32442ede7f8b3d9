package transport

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/peer"
)

// NewAddressProvider returns routes as Raft's address provider
// (raft.NetworkTransportConfig.ServerAddressProvider) for node self,
// whose own address is local(); nil when routes route no Raft traffic
// (Raft then dials configured addresses without asking). It does not
// copy routes (the caller must not change them).
func NewAddressProvider(routes peer.Routes, self string, local func() raft.ServerAddress) raft.ServerAddressProvider {
	for _, route := range routes {
		if route.Raft != "" {
			return &raftRoutes{routes: routes, self: raft.ServerID(self), local: local}
		}
	}
	return nil
}

// raftRoutes implements raft.ServerAddressProvider over peer.Routes.
type raftRoutes struct {
	routes peer.Routes
	self   raft.ServerID
	local  func() raft.ServerAddress
}

// ServerAddr implements raft.ServerAddressProvider. Raft also asks it for
// this node's own address, which it puts in its messages (as the leader's
// or the candidate's address): that is the node's own, never a route. A
// peer without a Raft route is an error, on which Raft falls back to the
// peer's configured address.
func (r *raftRoutes) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if id == r.self {
		return r.local(), nil
	}
	if a := r.routes[string(id)].Raft; a != "" {
		return raft.ServerAddress(a), nil
	}
	return "", fmt.Errorf("no raft route to %s", id)
}
