// Package partition holds the identity of topic partitions: topic name
// validation, Kafka's default key partitioner, and the on-disk directory of a
// partition's log.
//
// # Invariants
//
//   - The package imports only the standard library: the Go client imports
//     it, and every client binary links what it links.
//   - Topic names follow Kafka's rules (1..249 characters of [a-zA-Z0-9._-],
//     not "." or ".."), so a valid name is a single, harmless path element.
//     [Dir] validates the name before building a path; no unchecked name
//     ever reaches the file system.
//   - [ForKey] is Kafka's default partitioner for keyed records
//     (toPositive(murmur2(key)) % numPartitions), so Kafka clients, franz-go
//     and logd clients place a key on the same partition.
//
// # Caveats
//
//   - Kafka also refuses to create a topic whose name collides with an
//     existing one once '.' and '_' are treated as equal (metrics names);
//     that check needs the set of topics and belongs to whoever owns it.
//     [MetricsName] gives the key to compare.
//   - Records without a key are not placed by ForKey: Kafka uses a sticky
//     partitioner for them, a client policy.
package partition
