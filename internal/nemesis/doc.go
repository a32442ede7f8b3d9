// Package nemesis injects faults into a cluster of real logd processes
// and keeps a record of them, for the end-to-end fault tests of cmd/logd
// (docs/faults.md).
//
// A Net puts a TCP proxy on every ordered pair of nodes, one for Raft and
// one for the client API: node i dials node j only through its own proxy
// (logd's LOGD_PEER_ROUTES, peer.Resolver), so one direction of one link
// can be cut (closing its connections, then refusing or blackholing new
// ones), made lossy (a connection dropped at a chunk, with a probability)
// or slow (latency and jitter per chunk), and healed.
// Clients reach the nodes directly: a partition separates nodes, not the
// test from them.
//
// A Schedule is drawn from a seed: faults of the enabled kinds, one at a
// time, each with its random duration and random picks (which node, which
// minority, which links), with calm periods between them. The same seed,
// cluster size, duration and kinds give the same schedule. Real processes
// are not deterministic, so a replay gives the same faults, not the same
// history. Faults that name "the leader" resolve it when they start.
//
// A Runner applies a schedule through Processes (SIGKILL and restart,
// SIGSTOP and SIGCONT, implemented by the test over its processes) and the
// Net, logs each fault and heal with its time from the run's start, keeps
// them for the report, and leaves the cluster healed when it returns.
//
// Nodes are numbered from 0 and named n1, n2, ... in the log, as the
// test harness names them.
package nemesis
