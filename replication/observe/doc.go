// Package observe is what a node sees of its own Raft group's traffic:
// Raft's measurements, and the leader's commit index as the node hears
// it.
//
// hashicorp/raft reports its timings through armon/go-metrics'
// process-wide sink, which would mix the Raft groups of one process and
// hold what it gathers in memory; logd measures what an operator needs
// itself, at seams it owns. Metrics gathers them per Raft group: the
// owner's FSM adapter times applies and snapshot persists, TimeLogStore
// times the Raft log store's writes (each an fsync), the Transport wrapper
// notes each follower's answers to the leader's AppendEntries, and the
// owner reports leader changes from Raft's observer. The front end
// renders them (server/raft_metrics.go); docs/operations.md lists them.
//
// LeaderCommits is for readiness: a follower's own commit index is cut to
// what it holds, so a node that replays a long log would call itself
// caught up after each batch. The Transport wrapper notes the commit index
// the leader sent in the first AppendEntries of each term before Raft
// handles the request, and the node waits until it applied that much
// (docs/faults.md, follower reads). Its Forward loop answers a request it
// holds at shutdown with an empty response of the request's type, as
// hashicorp/raft's in-memory pipeline needs.
//
// The Transport wrapper also keeps hashicorp/raft from applying a deposed
// leader's own entries as committed (docs/faults.md): heartbeats of a
// newer term go through Raft's main loop rather than its fast path
// (heartbeat.go), and each AppendEntries reaches Raft with the leader's
// commit index cut to the request's last entry (clampCommit).
//
// Nothing here is package-level state: each Raft group of a process has
// its own Metrics, LeaderCommits and wrappers.
package observe
