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
// SIGSTOP and SIGCONT, implemented by the test over its processes), the
// Net, Members (membership changes) and Moves (drains, and the replica
// moves in flight, over the cluster's admin calls), logs each fault and
// heal with its time from the run's start, keeps them for the report, and
// leaves the cluster healed when it returns: nothing killed, paused, cut,
// removed or drained.
//
// A KillMidMove fault aims at data group replica moves: it drains a node
// so that the meta leader moves replicas off it, polls until a move is in
// flight, and kills its source, its target or the meta leader. Moves are
// seen by polling, so a fault may see none within its bound, or its move
// may finish before the kill: Runner.MovesHit counts the faults that
// killed a node while a move was in flight (seen before the kill, its
// mark still there after it).
//
// Nodes are numbered from 0 and named n1, n2, ... in the log, as the
// test harness names them.
package nemesis
