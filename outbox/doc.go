// Package outbox is a transactional outbox for database/sql: a service
// writes its business change and the event announcing it in one
// transaction (Outbox.Write), and a Relay later appends the committed
// events to logd and deletes them once the append is acknowledged.
//
// Invariants and their reasons:
//
//   - An event exists in the outbox table if and only if its transaction
//     committed: there is no lost event (a crash after the commit leaves the
//     row for the relay) and no phantom one (a rolled back transaction
//     leaves no row).
//   - Every row's id is its record's idempotency key, and the record
//     carries the id in the HeaderID header. A relay that crashes after
//     the append and before the delete re-produces its batch when it (or
//     another relay) starts again; logd answers those as duplicates within
//     the topic's idempotency window (idempotency.window.ms,
//     idempotency.max.keys), so each row is appended once. A relay checks
//     the window when it first relays to a topic and logs a warning (and
//     counts it in Stats) when it cannot cover RelayOptions.MaxRedelivery.
//   - Ids sort by creation time (a ULID-like text id: 48 bits of Unix
//     milliseconds, 80 bits that increase within a millisecond in one
//     Outbox and are random otherwise), and a relay appends rows in id
//     order, each topic's consecutive rows in one Produce call, so records
//     of one key keep their order in their partition. This holds when the
//     writes of one key are serialized by the database, which SQLite
//     always does and PostgreSQL does when the transactions writing a key
//     lock a common row before Write; two concurrent PostgreSQL
//     transactions writing the same key without such a lock may commit in
//     the opposite order of their ids, and the relay may then see, and
//     append, the later id first.
//   - One relay is active at a time per lease name: a row in the lease
//     table names the holder and an expiry; the holder renews it before each
//     batch, bounds each append by the lease's expiry, and deletes rows
//     only in a transaction that still finds its lease. Claiming rows with
//     SKIP LOCKED instead would let two relays append one key's rows out
//     of order.
//
// Limits: restoring the outbox table from a backup brings back rows that
// were already relayed; the relay re-produces them, and logd appends them
// again unless their ids are still in the topic's idempotency window. An
// idempotency window is per topic, so a consumer that must see each event
// once still needs its own guard (package inbox).
//
// The DDL is documented and created only by SQLiteSchema and
// PostgresSchema: no migrations run behind the caller's back.
package outbox
