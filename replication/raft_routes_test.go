package replication

import (
	"testing"

	"github.com/hashicorp/raft"
)

// TestRaftAddressProvider: Raft dials a routed peer at its route, falls
// back for others, and gives its own address as itself; without Raft
// routes there is no provider.
func TestRaftAddressProvider(t *testing.T) {
	var none *PeerResolver
	local := func() raft.ServerAddress { return "self:1" }
	if none.raftProvider("a", local) != nil || NewPeerResolver(PeerRoutes{"n2": {API: "p:2"}}).raftProvider("a", local) != nil {
		t.Error("a resolver without Raft routes gives Raft a provider")
	}
	prov := NewPeerResolver(PeerRoutes{"a": {Raft: "p:1", API: "p:2"}, "b": {Raft: "p:3"}}).raftProvider("self", local)
	if got, err := prov.ServerAddr("a"); err != nil || got != raft.ServerAddress("p:1") {
		t.Errorf("ServerAddr(a) = %q, %v", got, err)
	}
	if got, err := prov.ServerAddr("self"); err != nil || got != "self:1" {
		t.Errorf("ServerAddr(self) = %q, %v; want its own address (Raft sends it to peers)", got, err)
	}
	if _, err := prov.ServerAddr("c"); err == nil {
		t.Error("ServerAddr of an unrouted peer: no error, so Raft would not fall back")
	}
}
