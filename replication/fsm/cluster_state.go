package fsm

import (
	"fmt"
	"sort"
	"sync"

	"github.com/logd-dev/logd/backend"
)

// nodeRegistry maps node ids to their advertised addresses (client API,
// peer, Kafka) and feature levels. The FSM goroutine writes it; any goroutine reads it.
type nodeRegistry struct {
	mu sync.RWMutex
	// nodes by id; guarded by mu.
	nodes map[string]RegisteredNode
}

// RegisteredNode is one entry of the node registry.
type RegisteredNode struct {
	ID         string `json:"id"`
	APIAddress string `json:"api_address"`
	// FeatureLevel is the highest feature level the node's build
	// understands; 0 when it registered none (a build before feature
	// levels, or a node registered by another: see NodeFeatureLevel).
	FeatureLevel FeatureLevel `json:"feature_level,omitempty"`
	// PeerAddress is where other nodes call this one for node-to-node
	// HTTP, when it serves that on a listener of its own; "" when it
	// registered none (CallAddress is then its API address).
	PeerAddress string `json:"peer_address,omitempty"`
	// KafkaAddress is its advertised Kafka address; "" when it registered
	// none (no Kafka listener, or a build before the field).
	KafkaAddress string `json:"kafka_address,omitempty"`
	// SecretFingerprint names the cluster secret the node holds
	// (replication's secret.go: a hash of it, never the secret); "" when
	// it holds none, or its build predates the field.
	SecretFingerprint string `json:"secret_fingerprint,omitempty"`
}

// CallAddress is the address other nodes call n at for node-to-node HTTP:
// its peer address, or its client API address when it registered none.
func (n RegisteredNode) CallAddress() string {
	if n.PeerAddress != "" {
		return n.PeerAddress
	}
	return n.APIAddress
}

func (r *nodeRegistry) set(n RegisteredNode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nodes == nil {
		r.nodes = map[string]RegisteredNode{}
	}
	r.nodes[n.ID] = n
}

func (r *nodeRegistry) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.nodes, id)
}

func (r *nodeRegistry) get(id string) (RegisteredNode, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n, ok := r.nodes[id]
	return n, ok
}

// list returns the registry sorted by id.
func (r *nodeRegistry) list() []RegisteredNode {
	r.mu.RLock()
	out := make([]RegisteredNode, 0, len(r.nodes))
	for _, n := range r.nodes {
		out = append(out, n)
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
	nodes := map[string]RegisteredNode{}
	if m != nil {
		if m.Version != clusterManifestVersion {
			return fmt.Errorf("restore: %w: cluster manifest version %d", backend.ErrUnknownCommand, m.Version)
		}
		for _, n := range m.Nodes {
			nodes[n.ID] = n
		}
	}
	r.mu.Lock()
	r.nodes = nodes
	r.mu.Unlock()
	return nil
}

// NodeAddress returns the registered client API address of a node.
func (f *FSM) NodeAddress(id string) (string, bool) {
	n, ok := f.nodes.get(id)
	return n.APIAddress, ok
}

// Node returns a node's registration.
func (f *FSM) Node(id string) (RegisteredNode, bool) { return f.nodes.get(id) }

// NodeFeatureLevel returns the feature level a node registered: BaseLevel
// when it registered none (unregistered, or registered by a build before
// feature levels, which understands exactly the kinds of BaseLevel).
func (f *FSM) NodeFeatureLevel(id string) FeatureLevel {
	n, _ := f.nodes.get(id)
	return max(n.FeatureLevel, BaseLevel)
}

// Nodes returns the node registry, sorted by id.
func (f *FSM) Nodes() []RegisteredNode { return f.nodes.list() }
