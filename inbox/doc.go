// Package inbox makes a consumer's effects idempotent on database/sql:
// Inbox.Process runs the handler's effect and records the message id in
// one transaction, and skips ids it has recorded. A message delivered
// twice (an ack lost after the commit, a redriven record, a relay that
// appended twice outside its idempotency window) is applied once.
//
// Invariants and their reasons:
//
//   - The id row and the effect commit together or not at all: a crash
//     between the effect and the ack leaves both, so the redelivery is
//     skipped; a crash before the commit leaves neither, so the
//     redelivery applies the effect.
//   - The id is inserted first, under the table's primary key: two
//     concurrent Process calls for one id cannot both insert it. On
//     PostgreSQL the second insert waits for the first transaction and then
//     finds the row (or inserts it, if the first rolled back); on SQLite
//     writers are serialized by the database lock. Serialization failures,
//     deadlocks and a busy SQLite database are retried with the handler
//     run again in a new transaction, so the handler must touch only the
//     transaction it is given.
//   - Ids are kept for Options.Window after they were processed, then
//     Prune may delete them. The window must exceed the longest time a
//     message can be delivered again after its first processing: the
//     source topic's retention for a consumer that may rewind, the queue's
//     redelivery and dead-letter redrive times, and the outbox relay's
//     redelivery. An id pruned before its last redelivery is applied again.
//
// Which id: the adapters take it from the outbox.HeaderID header
// ("logd-outbox-id") or a header the caller names; a record without one
// falls back to "topic/partition/offset" only where the caller allows it,
// since a record redriven from a dead letter is appended again at a new
// offset and would get a new id.
package inbox
