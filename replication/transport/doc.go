// Package transport is a node's Raft port (Stream, stream.go): the
// raft.StreamLayer under its Raft transport, capped, and under peer TLS
// authenticated by node certificates of members only; and Raft's address
// provider over peer routes (NewAddressProvider, routes.go).
//
// Invariants:
//
//   - It imports hashicorp/raft and package peer, never replication: the
//     node drives it through a few methods (Start, Attach, Prune, Stats,
//     DialNode) and says who may connect with a function, so the port
//     holds no state of a Raft group and assumes none is the only one.
//   - Raft gets only connections the port admitted; at most maxConns
//     accepted connections are open at once, in their handshake or
//     serving Raft.
//   - A refusal is counted before its connection is closed, so a peer
//     that sees the close finds it counted (Stream.Stats).
//   - Close closes every connection the port accepted and waits for every
//     goroutine it started.
//
// Caveats: Raft's RPCs carry a sender id that nothing binds to the
// connection, so the checks are per connection, at accept, and a
// member's node key can send RPCs in another member's name
// (docs/security.md, "Peers"). The member function decides who is a
// member: replication's admits any node certificate of the cluster CA
// while the node knows no configuration yet. A removed node's
// connections are closed only when the node calls Prune. Without TLS the
// port admits anyone who reaches it, which is safe only on loopback.
package transport
