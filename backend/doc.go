// Package backend is the front ends' one door into the cluster: the
// vocabulary in which the Connect API (package server) and the Kafka
// listener (package kafka) ask the cluster for something and hear back.
//
// It holds:
//
//   - the interfaces the front ends call (API, for the Connect API, and
//     Kafka), each method with its contract; package replication
//     implements them;
//   - requests, which say what a caller wants (CreateTopic, GroupJoin,
//     QueueClaim, RedriveSpec, Append, ...): never Raft payloads, since the
//     implementation builds the state machine's commands from them and
//     adds what the cluster decides (the quota, the calling principal);
//   - answers, plain values and copies the caller owns (TopicInfo,
//     ReadResult, QueueClaimResult, Status, ...);
//   - the error sentinels and typed errors the front ends map to their
//     codes (ErrNotLeader, ErrUnknownTopic, *OverloadedError,
//     *OutOfRangeError, ...): the state machine fails with these values,
//     and the implementation wraps the partition logs' errors with them;
//   - the caller's principal in a context (WithPrincipal, PrincipalFrom);
//   - the formats a front end reads in records: the dead-letter headers
//     and ParseDeadLetter, the redrive headers.
//
// The package is pure (no Raft, no network, no clock, no storage): of this
// module it imports only auth, batch, group and queue, whose errors and
// values the front ends use under their own names. The architecture test
// (internal/archtest) keeps it so, and keeps every other package from
// re-exporting its names. See docs/architecture.md, "The backend
// boundary".
package backend
