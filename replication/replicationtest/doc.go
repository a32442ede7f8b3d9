// Package replicationtest opens a real single-node logd node inside a test
// process: one replication.Node, bootstrapped as a Raft group of itself,
// and the replication.Backend over it, which the front ends' tests (server,
// kafka) and logdtest serve.
//
// By default Raft runs on hashicorp/raft's in-memory transport and stores
// with its smallest timeouts, so the node leads within milliseconds; the
// partition logs live in a temporary directory. Options set what the tests
// vary: the clock, the partition logs' file system, a real Raft port on
// 127.0.0.1 (with peer TLS), a node that is never bootstrapped, the
// feature level, the cluster quota, the registered API address.
//
// Start closes the node through the test's Cleanup, and Close joins every
// goroutine the node started, so a goleak check in TestMain stays clean.
// The cleaner's automatic pass is off: a test that wants retention or
// compaction runs Node.Clean itself.
//
// Only tests and other test support import this package (see
// docs/architecture.md, "Packages"); a front end's tests may, since the
// architecture test checks the front ends' non-test code only.
package replicationtest
