// Package server implements logd's Connect API (gRPC, gRPC-Web and JSON
// over HTTP from one protobuf definition), plus /metrics, /healthz,
// /readyz, grpc.health.v1 and gRPC reflection on the same handler
// (health.go; docs/operations.md). Every call has a request id, echoed in
// its answer and logged with its lines (request_id.go).
//
// The handlers are a thin layer: decode a request, check its shape, call
// the backend (backend.API; replication.Backend implements it) and map its
// errors through one table (errors.go). They hold no storage and see
// nothing of Raft: reads come back as copies, writes go through the
// backend. Handlers validate their requests completely before calling a
// write, so a refused request writes nothing; every error a client can act
// on carries a logdv1.ErrorInfo detail with its own reason. One handler per
// file.
//
// Produce hands the call's records to the backend, which routes them,
// builds one Kafka record batch per partition and appends them all in one
// Raft entry: a produce call is applied whole or not at all. Concurrent
// calls share Raft's group commit: the leader writes every entry waiting in
// its queue with one fsync.
//
// Fetch serves what this node has applied, which is all committed: the
// backend returns stored batches as they are, and Fetch decodes their
// records for the API; with max_wait_ms it long-polls on the read's change
// channel.
//
// Bounds under abuse: every request passes request_limits.go first, which
// bounds its body before anything reads it whole (in size, as sent and as
// inflated, and in time, by a deadline that moves with the bytes received
// and is lifted once the body is in, so long polls wait as asked), and
// charges it to a memory budget of bodies in flight: a request that does
// not fit is refused with OVERLOADED and a retry-after hint, unread when
// its length is declared. Server.Listener caps a listener's connections,
// in all and per remote address (listener.go); cmd/logd keeps the cap
// below the open-file limit less a reserve for the node's own files. The
// cluster's topic quota is checked by the state machine when it applies a
// creation (replication.Config.Quota).
//
// Security (docs/security.md): authn.go authenticates every call before
// it is forwarded or decoded (a bearer token, else a verified client
// certificate; a bad credential is UNAUTHENTICATED), and puts the
// principal in the context (backend.WithPrincipal). authz.go holds the
// one table from procedure to the permissions a call needs, applied by an
// interceptor against the backend's replicated ACLs; a follower applies it
// to a write before forwarding it (forward_authz.go), and the leader trusts
// a forwarded principal only from a node certificate. With a peer
// listener (Options.PeerListener, peer.go) node-to-node calls have a port
// of their own, and the client port serves no segments and drops every
// forwarding header. audit.go writes one
// line per admin action; quota.go bounds each principal's produce and fetch
// bytes per second.
//
// Imports: besides the API, server uses replication for the backend's
// value types and error sentinels (re-exported from the state machine),
// group and queue for consumer group and queue group values, batch to
// decode fetched batches into the API's records, and partition for topic
// name checks of requests; never log, replication/fsm or hashicorp/raft.
package server
