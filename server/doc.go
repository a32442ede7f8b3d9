// Package server implements logd's Connect API (gRPC, gRPC-Web and JSON
// over HTTP from one protobuf definition) over a replication.Node, plus
// /metrics, /healthz and /readyz on the same handler.
//
// Handlers validate their requests completely before proposing anything, so
// a refused request writes nothing; every error a client can act on carries
// a logdv1.ErrorInfo detail with its own reason. One handler per file.
//
// Produce builds one Kafka record batch per partition from the request's
// records and appends them all in one Raft entry: a produce call is applied
// whole or not at all. Concurrent calls share Raft's group commit: the
// leader writes every entry waiting in its queue with one fsync.
//
// Fetch serves what this node has applied, which is all committed; with
// max_wait_ms it long-polls on the partition's change channel.
package server
