// Package dedup holds a topic's idempotency window: the keys of records
// appended recently, each with its payload's [Digest] and where the record
// went, so that a retried produce is answered with the original partition
// and offset instead of being appended twice.
//
// The package is part of the replicated state machine: it imports only the
// standard library, xxh3 and internal/varint, and reads no clock.
//
// # Invariants
//
//   - Time is passed in, never read: every method that depends on time
//     takes the replicated command time (Unix nanoseconds), so replicas that
//     apply the same commands hold the same keys. A key is held during
//     [appended, [Entry].Expires).
//   - A window holds at most its bound of keys ([NewWindow], SetMaxKeys). At
//     the bound an insert evicts the oldest key, before its window ends, and
//     counts the eviction ([Stats]).
//   - [Window.Admit] is all or nothing: if one of a command's keys is held,
//     it changes nothing.
//   - A lookup compares key bytes, so two keys never share an entry. The
//     index's hash seed is chosen per process; it changes where keys sit in
//     memory, never what the window answers or encodes.
//   - [Digest] is XXH3-128 over the record's framed key, value and headers.
//     Digests travel in Raft entries and snapshots and are compared across
//     nodes and builds: the algorithm never changes (TestDigest pins
//     it).
//   - A window's encoding has one writer ([View.WriteTo]) and one reader
//     ([ReadWindow]), and starts with a version byte. A truncated, padded or
//     malformed encoding is [ErrBadEncoding], never a panic.
//   - A [View] never changes: the window does not write memory an
//     unreleased view may read, so a snapshot encodes a view off the state
//     machine's goroutine while the window goes on.
//
// # Caveats
//
//   - A retry of an evicted key is appended again: size the bound for the
//     key rate (the topic's idempotency.max.keys).
//   - Keys leave in insertion order. After a topic's window is shortened, a
//     key inserted under the longer window holds shorter-lived keys behind
//     it until it expires; they are not found by lookups, and the bound
//     still holds.
//   - Eviction and expiry counters are per process; snapshots do not keep
//     them.
//   - A [Window] is safe for concurrent use; a [Digester] is not.
package dedup
