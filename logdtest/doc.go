// Package logdtest runs a real logd node inside a test process, for tests
// of code that talks to logd through package client (the client itself,
// logctl, applications).
//
// A Server is one replication.Node, bootstrapped as a single-node Raft
// group by package replication/replicationtest, and the server package's
// Connect handler over its replication.Backend (built as cmd/logd builds
// it), on an httptest server at 127.0.0.1. Raft runs on hashicorp/raft's in-memory transport and
// stores with short timeouts, so a node leads within milliseconds; the
// partition logs live in a temporary directory. Every answer is the real
// server's: there is no second implementation of logd's semantics to keep
// in step with it.
//
// Tests control what the node cannot be asked for over the API:
//   - Options.Now is the node's clock. It stamps every command, so lease
//     deadlines, backoff, session expiry and the cleaner's retention
//     decisions follow it, and records produced without a timestamp are
//     stamped by it. A consumer group's lag in seconds is measured on the
//     wall clock.
//   - Intercept, FailNext and Calls sit in front of the handler: they run a
//     function before the next calls of a procedure (to fail it without
//     effect, or block it like a slow server) and count calls.
//   - Clean runs the leader's cleaner pass now (retention and compaction by
//     the topics' settings); the automatic pass is off.
//   - Metric reads the server's Prometheus metrics.
//   - Options.FS puts the partition logs on a file system of the test's,
//     such as a log/logtest.FaultFS that fails writes or syncs on demand.
//
// Close (run by Start's tb.Cleanup) ends every goroutine the node and the
// HTTP server started, so the caller's goleak check stays clean.
package logdtest
