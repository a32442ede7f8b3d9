// Package e2e is the end-to-end harness: real logd processes on
// 127.0.0.1, alone (StartNode) or as a cluster (NewCluster), a producer
// loop that records what was attempted and acknowledged (Producers), and
// the checks every fault test ends with (Check, Cluster.CheckEveryNode).
// cmd/logd's end-to-end tests run on it (docs/faults.md), and any other
// package's tests may.
//
// A package that uses it calls Main from its TestMain: Main builds logd
// once for the test process (with the race detector and the faults build
// tag, its version stamped as Version) and removes it when the tests end;
// Logd returns its path and LogctlBinary builds logctl beside it on first
// use. Every process a Node starts is SIGKILLed when its test ends, and on
// Linux when the test process dies. ChildCommand runs the test binary
// again as a helper process (a client a test kills or stops for real),
// in which Main builds nothing. DropProxy, between Kafka clients and a
// Kafka listener, drops the reply to the first Produce, so a client
// certainly sends that batch again (the idempotent producer tests of
// cmd/logd and of the kafka package, which starts no process and so
// needs no Main).
//
// The default run is short; LOGD_FAULT_LONG=1 (make fault) runs the long
// versions (FaultLong). Waits poll real processes, which announce nothing:
// WaitFor logs which test waits for what every WaitProgress, so a wait
// that hangs under load names itself in the test's log.
//
// Only tests import this package (docs/architecture.md, "Packages").
package e2e
