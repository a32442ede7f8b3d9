// Package redrive runs redrive jobs on the leader: a job moves the dead
// letters of a dead-letter topic back to their origin topic (or to a
// target) as the cluster's work, not a client's loop, so it survives the
// client and a leader change (docs/architecture.md, "Redrive jobs").
//
// A job's definition, state, counters and position are replicated state
// (the redrive command of package replication/fsm, at fsm.RedriveLevel),
// so whichever node leads runs every running job. Runner.Run is the
// leader's loop: once the node leads with its barrier applied
// (Node.Leads) it starts one worker per running job, and it cancels them
// all when the node stops leading. A worker reads the dead-letter topic
// from the job's position (the committed offsets of its internal group
// fsm.RedriveGroup), produces the selected records of one batch, then
// proposes one advance entry with the position after that batch and the
// batch's counters. Runner.Start and Runner.Stop propose a job's start
// and stop and wake the loop.
//
// The package sees the node through two interfaces it declares: Node
// (whether it leads, reads of stored batches, produce, the redrive
// command's proposal) and State (the applied topics, jobs and groups,
// which *fsm.FSM implements). Package replication implements Node over
// its node and starts and stops Run with the node's lifecycle; this
// package imports neither Raft nor package replication.
//
// # Invariants
//
//   - A redriven record's idempotency key derives from its dead letter
//     (IdempotencyKey: dead-letter topic, partition and offset), and its
//     payload from the dead letter and the job's definition alone
//     (Record). A batch a leader produced but did not commit the advance
//     of before a leader change is produced again by the next leader and
//     answered as duplicates (the idempotency window's rule: same key,
//     same payload), so each dead letter lands once.
//   - The position and the counters of a batch commit in one entry
//     (fsm.RedriveAdvance), so they never disagree, and a new leader
//     resumes from the last batch committed.
//   - A stop takes effect after the batch in hand; the advance of that
//     batch is still applied, since its records were written.
//   - The filter is backend.RedriveMatch over backend.ParseDeadLetter,
//     which the API's dead-letter list uses too, so a list under a filter
//     shows what a job with that filter moves.
//   - No package-level state: each node (each Raft group) has its own
//     Runner, and its log lines carry the job's id under the node's
//     logger.
//
// # Caveats
//
//   - Exactly once holds within the target's idempotency window
//     (idempotency.window.ms): a job resumed after a pause longer than the
//     window may write the batch it had in hand twice.
//   - A rate paces the records a worker produces, per job and per node;
//     a leader change restarts the pacing.
//   - While admission control refuses the target, the worker waits and
//     produces again; a job never adds to an overload.
package redrive
