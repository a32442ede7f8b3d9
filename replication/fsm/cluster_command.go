package fsm

// NodeRegister records that node ID serves its client API at APIAddress
// (host:port, as advertised). Any node uses the registry to forward writes
// to the leader and to fetch segment bytes from a peer during snapshot
// catch-up, so it is replicated state and part of every snapshot.
//
// FeatureLevel is the highest feature level the node's build understands
// (0: not known, as in registrations written before feature levels).
// PeerAddress is where other nodes call the node for node-to-node HTTP
// (forwarded writes, segment catch-up, the leader's questions to a joining
// node) when it serves those on a listener of their own (--peer-listen),
// and KafkaAddress the Kafka address its Metadata answers give
// (--kafka-advertise); each is empty when the node has none, or its build
// predates the field. Older builds ignore all three optional fields (the
// payload is JSON, decoded without a check for unknown fields), and no
// Apply decision depends on them, so replicas of different builds still
// agree and the payload keeps its version: docs/architecture.md, "Rolling
// upgrades".
type NodeRegister struct {
	ID           string       `json:"id"`
	APIAddress   string       `json:"api_address"`
	FeatureLevel FeatureLevel `json:"feature_level,omitempty"`
	PeerAddress  string       `json:"peer_address,omitempty"`
	KafkaAddress string       `json:"kafka_address,omitempty"`
	// SecretFingerprint is RegisteredNode.SecretFingerprint: optional,
	// and no Apply decision depends on it either.
	SecretFingerprint string `json:"secret_fingerprint,omitempty"`
}

// NodeDeregister forgets a node that was removed from the cluster.
type NodeDeregister struct {
	ID string `json:"id"`
}
