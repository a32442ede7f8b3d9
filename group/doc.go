// Package group holds the pure state of consumer groups (and, in
// queue*.go, queue groups): no raft, no network, no clock. The replicated
// state machine (package replication) applies commands to these types with
// the leader-stamped command time; tests drive them with a fake clock.
//
// Consumer groups (consumer.go, assign.go, offsets.go):
//
//   - A committed offset is the next offset to read (Kafka meaning), per
//     (group, topic, partition). It only moves forward by commits; only an
//     explicit reset (ResetOffsets) moves it back.
//   - Members join for topics, heartbeat and leave. The assignment is
//     computed here (AssignPartitions): every partition of a subscribed
//     topic has exactly one live owner, shares differ by at most one, and
//     a partition stays with its owner unless the owner is gone or holds
//     more than its share (sticky). Moves away from a live owner are
//     cooperative: the partition is pending until the owner releases it in
//     a heartbeat (after committing), or until the owner's session timeout
//     passes; members not involved keep their partitions and generation.
//   - Generations fence: the group's generation increases at every change
//     of ownership and every reset, and each partition remembers the
//     generation its owner got it at (Since). A commit or fetch is
//     accepted only from the owner with a generation >= Since, so a member
//     that lost a partition, or whose offsets were reset, cannot commit
//     over the new position (ErrStaleGeneration).
//   - Session timeouts are lazy: every mutating method first expires the
//     members whose LastSeen + SessionTimeout is before the command's
//     time. Nothing happens between commands; the surviving members'
//     heartbeats are the commands that move a dead member's partitions.
//     Expiry is deterministic because the time is the command's.
//   - Retention: a position below the log start follows the member's reset
//     policy (earliest, latest, none). Moving forward is AutoReset, which
//     counts the skipped records per partition.
//
// Offsets of a topic that was deleted (or deleted and created again; see
// Topics.Topic's incarnation) are dropped.
//
// Queue groups (queue*.go, lease*.go, backoff.go):
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
package group
