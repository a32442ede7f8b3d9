// Package queue holds the pure state of queue groups, the work-queue mode:
// a group consumes a topic record by record under per-record leases,
// acknowledges or fails each delivery by its token, backs failures off and
// moves poison records to a dead-letter topic (docs/guide.md, "Work queues").
// Like package group, its sibling for consumer groups, it reads no clock,
// no randomness, no network and no storage: the replicated state machine
// (package replication) applies commands to a Group with the
// leader-stamped command time and Raft index, and looks records up through
// a RecordSource; tests drive it with scripts in testdata/. Neither package
// imports the other: they share no state and no code.
//
// Files: queue.go (claim, ack, nack, extend, dead letters), lease.go and
// token.go (a tracked record and its delivery token), backoff.go, config.go,
// health.go (backlog and retention inputs for admission control), age.go
// (append times, for the backlog's age), drain.go (the drain rate and
// retry-after hints), history.go (each record's attempts), stats.go,
// pause.go, release.go (a worker's leases ended), reset.go (start
// offsets moved), snapshot.go.
//
// Invariants:
//
//   - Per partition, every offset below Start is finished (acked or
//     dead-lettered); offsets in [Start, Next) are finished unless tracked;
//     offsets at or above Next were never delivered. Tracked records are
//     ready (for redelivery), in flight (lease until a deadline, with the
//     current delivery's tag), delayed (backoff until a time), or pending
//     for the dead-letter topic. MaxInFlight bounds the unfinished tracked
//     records, so memory is the cap plus finished entries awaiting
//     compaction (at most about as many again) and a ring of the last 256
//     finished deliveries (to answer a repeated ack as a duplicate).
//   - A token (partition, offset, delivery, tag) is accepted only while it
//     names the current delivery and now < its lease deadline: at exactly
//     the deadline the record is claimable again and the token stale.
//     Stale tokens change nothing. The tag hashes the group's secret (set
//     by the leader at creation), the claim's Raft index and the delivery.
//   - Time is lazy and the command's: expiry, backoff ends, deadlines and
//     the age limit are checked when a claim scans a partition; Wake keeps
//     the scan off the hot path while every lease is live.
//   - Backoff is capped exponential with full jitter, the jitter a hash of
//     (seed, partition, offset, delivery) so replicas agree.
//   - Dead-lettering is decided here (PendingDeadLetters) and done by the
//     caller in the same command (MarkDeadLettered), which writes the
//     dead-letter records: a record is never both live and dead.
//   - Claims look records up through RecordSource, which must answer the
//     same on every replica (offsets below the command's end offsets).
//   - From the command that makes the state machine reach feature level 6
//     (SetExactBytes, at the same Raft index on every replica), a group
//     keeps that level's state: the exact bytes of its backlog (one sum
//     per partition and one size per unfinished tracked record), append
//     marks (at most 256 per partition), and each unfinished record's last
//     MaxAttempts attempts (error texts cut at 1 KiB, HistoryBudget bytes
//     of them per group). Nothing of it depends on the backlog's length
//     but the marks' bound. Before, none of it is kept, so replicas of
//     older builds decide alike.
//   - The drain rate is sampled from the replicated finished counts at
//     command times (at most one sample a second, 16 kept), so hints
//     derived from it are the same on every node.
//   - Snapshot's JSON form is stored in Raft snapshots: a field's name, tag
//     and meaning never change (testdata/snapshot.json pins it), and
//     Restore refuses a snapshot whose counts disagree with its records.
package queue
