// Package kafka is logd's Kafka-protocol front end: a TCP listener that
// speaks the Apache Kafka wire protocol, so that Kafka clients (kcat and
// librdkafka, franz-go, sarama, kafkajs) produce to and consume from logd
// topics. It is a sibling of package server over the same backend
// (replication.Backend): it decodes a request, calls the backend through
// backend.Kafka and maps the backend's typed
// errors to Kafka error codes (errors.go). It holds no storage and sees
// nothing of Raft.
//
// # Wire protocol
//
// Requests and responses are encoded with github.com/twmb/franz-go/pkg/kmsg,
// generated from Kafka's message specifications; this package writes only
// the request and response headers and the framing (frame.go). The keys and
// versions it advertises are in versions.go; a request for any other key or
// version closes the connection, as Kafka does, except ApiVersions, which
// answers a version it does not know with the KIP-511 downgrade answer.
//
// # Connections
//
// Each connection has one goroutine reading requests and one handling
// them, in order: the responses of one connection go out in the order
// its requests came in, and a request is handled only after the previous
// one was (a produce after a produce is appended after it). The reader
// reads ahead a bounded number of requests, each bounded in size and
// charged to a memory budget shared by all connections before its body is
// read; when the budget is spent the reader stops reading, which holds the
// client back through TCP. The caller bounds the connections themselves by
// wrapping the listener (server.Server.Listener in cmd/logd).
//
// # Share groups
//
// Kafka's share groups (KIP-932) are logd's queue groups: the share
// coordinator (share_coordinator.go) keeps members, their share sessions
// and the deliveries each holds, on the Raft leader only; records are
// claimed, acknowledged and released through the queue groups' replicated
// commands, so leases, fencing and dead letters are the queue groups'
// (docs/kafka.md, "Share groups"). A share group's offsets are its queue
// groups' start offsets: AlterShareGroupOffsets moves them and
// DeleteShareGroupOffsets deletes the queue groups, each through one
// replicated command per topic.
//
// # Security
//
// A connection names its principal when it opens, from the client
// certificate its TLS handshake verified (the caller wraps the listener in
// TLS); with the checks on, one without is closed before its first
// request, unless SASL is enabled, when it must authenticate by SASL
// first. Each request
// is then authorized per topic and group from one table of API keys
// (auth.go), by the auth.Authorizer the Connect API asks too; the node's
// byte-rate quotas (package internal/quota) answer with
// throttle_time_ms, and admin actions write the audit log. SASL (PLAIN,
// SCRAM-SHA-256/512, auth_sasl.go) authenticates a connection once, its
// principal replacing the certificate's; SCRAM credentials are managed
// by the KIP-554 keys (user_scram.go). docs/security.md, "Kafka
// listener", has the rules.
//
// # Records
//
// logd stores Kafka RecordBatch v2 as produced: a produce request's batch
// for a partition is verified (one batch, magic 2, CRC-32C, counts, not
// transactional; a producer id only once the cluster serves idempotent
// producers) and appended as it is, compressed or not, in one Raft entry
// per topic; the state machine judges an idempotent producer's batch by
// its partition's producer state (init_producer_id.go, package
// replication/fsm producers.go). A fetch serves stored batches as stored,
// starting with the batch that holds the requested offset; only the
// partition leader epoch field, outside the CRC, is rewritten, since the
// log keeps its own bookkeeping there. The batch bytes are copied once,
// by the backend's read: the fetch response is encoded around them and
// written as pieces (fetch_frame.go). docs/kafka.md says what is
// supported and what is refused, and how.
//
// # Consumer groups
//
// The Raft leader coordinates every group (group_coordinator.go): Kafka's
// classic protocol, whose members, generations and plans live in the
// leader's memory only and are rebuilt by the members when leadership
// moves, while the committed offsets are logd's replicated group offsets
// (GroupBackend). A Kafka generation is fenced by the replicated group's
// generation, so an operator's offset reset makes its members drop their
// partitions and join again at the new offsets, and no commit of theirs
// from before the reset lands after it.
package kafka
