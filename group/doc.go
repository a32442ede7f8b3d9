// Package group holds the pure state of consumer groups: no raft, no
// network, no clock. The replicated state machine (package replication)
// applies commands to these types with the leader-stamped command time;
// tests drive them with a fake clock. Queue groups, the work-queue mode,
// are package queue.
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
// Groups coordinated outside this package (external.go): a Kafka consumer
// group's members and generations live in its coordinator (package kafka);
// its commits set the offsets with SetOffsets, which may move them back
// (as Kafka's commits may) and is fenced by the group's generation, so a
// reset refuses every commit the coordinator checked before it. One group
// is coordinated by one protocol at a time: SetOffsets refuses a group
// with live members of this package's protocol.
//
// Offsets of a topic that was deleted (or deleted and created again; see
// Topics.Topic's incarnation) are dropped.
package group
