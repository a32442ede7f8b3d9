package fsm

// NodeRegister records that node ID serves its client API at APIAddress
// (host:port, as advertised). Any node uses the registry to forward writes
// to the leader and to fetch segment bytes from a peer during snapshot
// catch-up, so it is replicated state and part of every snapshot.
//
// FeatureLevel is the highest feature level the node's build understands
// (0: not known, as in registrations written before feature levels). Older
// builds ignore the field; no Apply decision depends on it, so replicas of
// different builds still agree.
type NodeRegister struct {
	ID           string       `json:"id"`
	APIAddress   string       `json:"api_address"`
	FeatureLevel FeatureLevel `json:"feature_level,omitempty"`
}

// NodeDeregister forgets a node that was removed from the cluster.
type NodeDeregister struct {
	ID string `json:"id"`
}
