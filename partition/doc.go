// Package partition holds the identity of topic partitions: topic name
// validation and Kafka's default key partitioner.
//
// # Invariants
//
//   - The package imports only the standard library: the Go client imports
//     it, and every client binary links what it links.
//   - Topic names follow Kafka's rules (1..249 characters of [a-zA-Z0-9._-],
//     not "." or ".."), so a valid name is a single, harmless path element
//     with no '~' in it. The state machine builds a partition's directory
//     from a name only after [ValidateTopicName] accepted it, and parses
//     directory names back only through it.
//   - [ForKey] is Kafka's default partitioner for keyed records
//     (toPositive(murmur2(key)) % numPartitions), so Kafka clients, franz-go
//     and logd clients place a key on the same partition.
//
// # On disk
//
// This package makes no paths. The partition logs live in the data
// directory's topics/ (replication.Config.DataDir, docs/operations.md), one
// directory per topic incarnation and one per partition in it:
//
//	<data-dir>/topics/<name>~<createIndex>/<p>/
//
// createIndex is the Raft index of the create that made the topic, so a
// topic deleted and created again under the same name gets a new directory
// and never sees the old one's files; p is the partition number in
// decimal, and the directory holds that partition's log (package log).
// replication/fsm makes these names: topicDirName and openTopic
// (topics.go) for the topic and Topic.openPartitions for its partitions;
// parseTopicDirName reads them back when a restored snapshot removes the
// files of topics it no longer holds. A deleted topic's directory is
// renamed to <name>~<createIndex>.deleted-<index of the delete> until it
// is removed.
//
// # Caveats
//
//   - Kafka also refuses to create a topic whose name collides with an
//     existing one once '.' and '_' are treated as equal (metrics names);
//     logd does not: "a.b" and "a_b" are two topics.
//   - Records without a key are not placed by ForKey: Kafka uses a sticky
//     partitioner for them, a client policy.
package partition
