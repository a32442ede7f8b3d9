package transport

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/peer"
)

// TestNewAddressProvider: Raft dials a routed peer at its route, falls
// back for others, and gives its own address as itself; without Raft
// routes there is no provider.
func TestNewAddressProvider(t *testing.T) {
	local := func() raft.ServerAddress { return "self:1" }
	if NewAddressProvider(nil, "a", local) != nil || NewAddressProvider(peer.Routes{"n2": {API: "p:2"}}, "a", local) != nil {
		t.Error("routes without Raft routes give Raft a provider")
	}
	prov := NewAddressProvider(peer.Routes{"a": {Raft: "p:1", API: "p:2"}, "b": {Raft: "p:3"}, "self": {Raft: "p:9"}}, "self", local)
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
