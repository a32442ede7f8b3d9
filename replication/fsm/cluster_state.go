package fsm

import (
	"fmt"
	"sort"
	"sync"
)

// nodeRegistry maps node ids to their advertised client API addresses. The
// FSM goroutine writes it; any goroutine reads it.
type nodeRegistry struct {
	mu sync.RWMutex
	// addrs by node id; guarded by mu.
	addrs map[string]string
}

// RegisteredNode is one entry of the node registry.
type RegisteredNode struct {
	ID         string `json:"id"`
	APIAddress string `json:"api_address"`
}

func (r *nodeRegistry) set(id, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs == nil {
		r.addrs = map[string]string{}
	}
	r.addrs[id] = addr
}

func (r *nodeRegistry) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.addrs, id)
}

func (r *nodeRegistry) get(id string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.addrs[id]
	return a, ok
}

// list returns the registry sorted by id.
func (r *nodeRegistry) list() []RegisteredNode {
	r.mu.RLock()
	out := make([]RegisteredNode, 0, len(r.addrs))
	for id, a := range r.addrs {
		out = append(out, RegisteredNode{ID: id, APIAddress: a})
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// clusterManifestVersion versions the registry's part of a snapshot.
const clusterManifestVersion = 1

// clusterManifest is the registry in a snapshot.
type clusterManifest struct {
	Version int              `json:"version"`
	Nodes   []RegisteredNode `json:"nodes"`
}

func (r *nodeRegistry) snapshot() *clusterManifest {
	return &clusterManifest{Version: clusterManifestVersion, Nodes: r.list()}
}

// restore replaces the registry; a snapshot without one (older format)
// empties it.
func (r *nodeRegistry) restore(m *clusterManifest) error {
	addrs := map[string]string{}
	if m != nil {
		if m.Version != clusterManifestVersion {
			return fmt.Errorf("restore: %w: cluster manifest version %d", ErrUnknownCommand, m.Version)
		}
		for _, n := range m.Nodes {
			addrs[n.ID] = n.APIAddress
		}
	}
	r.mu.Lock()
	r.addrs = addrs
	r.mu.Unlock()
	return nil
}

// NodeAddress returns the registered client API address of a node.
func (f *FSM) NodeAddress(id string) (string, bool) { return f.nodes.get(id) }

// Nodes returns the node registry, sorted by id.
func (f *FSM) Nodes() []RegisteredNode { return f.nodes.list() }
