// Package peer holds what nodes need to call each other: a node's TLS
// identity for node-to-node traffic (TLS, tls.go), where this node dials
// each peer (Routes and Resolver, routes.go) and the one HTTP client
// setting of calls between nodes (HTTP, http.go). The Raft side (package
// replication and its Raft port, replication/transport), the front ends
// (server, kafka) and cmd/logd share it.
//
// Invariants:
//
//   - It imports the standard library only, so a front end that takes it
//     takes no Raft, storage or state machine with it; the architecture
//     test proves it (docs/architecture.md).
//   - A peer is a node only by a certificate a handshake verified against
//     the cluster CA and that carries a node id (TLS.NodeID); a call to a
//     peer's API port that meets any other certificate fails with
//     ErrNotNode before anything is sent.
//   - Nothing here starts a goroutine or holds a connection:
//     HTTP.Transport returns a new transport the caller owns. TLS
//     configurations are used as given, so material their callbacks
//     reload is current at each handshake.
//
// Caveats: which node a peer's certificate names is not matched to the
// node meant (any member's node certificate answers for any member, on
// the Raft port as on the API port), and a dial to an IP address checks
// no server name (docs/security.md, "Peers"). A Resolver routes an API
// address only once a node registry is attached to it.
package peer
