// Package replication runs logd's state machine (package
// replication/fsm) on hashicorp/raft: the node, proposals, membership and
// the leader's jobs. Snapshot catch-up from peers, backups and their
// restore live in package replication/catchup, which the node hands what
// it needs (catchup.go); which groups a backup cuts, where, and how their
// cuts agree with the meta group's is the node's (backup_groups.go,
// backup_cuts.go). The leader's jobs, the cleaner (package
// replication/cleaner) and the redrive jobs (package replication/redrive),
// see the node through interfaces they declare, which jobs.go implements;
// the node starts them with itself and Close ends them. See
// docs/architecture.md for the layout of the packages.
//
// Backend (backend.go) is the node as the front ends see it: it
// implements the interfaces of package backend (backend.API, backend.Kafka)
// in that package's values: copies of stored bytes instead of logs and
// topics, produce routing and batch building (produce.go), the long polls
// of reads and claims, and the state machine's commands built from the
// front ends' requests (convert.go, backend_commands.go). The front ends
// see neither this package's Node nor package fsm.
//
// A Node is one Raft group: its Raft, proposals, readiness and the
// membership of that group. One Raft group per cluster today (a single
// node by default). Raft's log and stable store live in package
// replication/raftstore under <data>/raft; the state machine's state is
// the set of topics and their partition logs under <data>/topics.
// raftFSM (adapter.go) adapts the state machine to raft's BatchingFSM and
// FSMSnapshot interfaces. Nothing of a Node is package-level state: a
// process may open several, each with its own Config (DataDir, RaftBind,
// and a Logger whose attributes name the group), and the packages it
// drives (raftstore, catchup, observe, cleaner, redrive, transport) take
// their directories, loggers and clocks as arguments.
//
// Invariants, each with a test:
//
//  1. A write is acknowledged only after its entry is committed (fsynced in
//     the Raft log store by a quorum) and applied: Node.Append waits for the
//     ApplyFuture, which completes after the state machine's ApplyBatch
//     returns.
//  2. Commands are stamped by the leader with its clock (Config.Now) and
//     sealed (fsm.Seal) before they are proposed; everything the state
//     machine decides comes from the entry (package fsm).
//  3. An I/O error inside Apply stops the node: Config.Fatal (by default
//     the process exits with status 70) runs before the result could be
//     acknowledged (TestDiskFaultStopsNode).
//  4. A node proposes a command kind (and payload version) only when the
//     cluster's feature level covers it: the lowest level the members of
//     the Raft configuration registered in the node registry (features.go),
//     so a rolling upgrade never hands an older replica an entry it would
//     stop on (TestClusterLevel, TestProposalFeatureGate). Every member
//     keeps its own entry current, a follower through the leader
//     (register.go), so the level rises once the last member runs a new
//     build, whether it restarted with a join or not
//     (TestFollowerRegistersNewLevel).
//
// Partition logs are not fsynced per append by default: the Raft log is the
// write-ahead log. After a power cut a partition's unsynced tail is cut at
// the last whole batch by log recovery, and Raft's replay of entries after
// the last snapshot re-appends exactly what is missing
// (TestPowerCutAfterSnapshot). Config.SyncPartitions fsyncs them on every
// append as well. Without it a node goroutine fsyncs a partition once
// Config.PartitionSyncBytes were appended to it, and a snapshot's Persist
// syncs the rest, neither holding up Apply (docs/performance.md, "Tail
// latency").
//
// Membership (cluster.go): a node joins as a non-voter and is promoted to
// voter once caught up; changes run one at a time on the leader. Before
// changing anything the leader checks the joining node's addresses, asks
// its client API who it is and dials its Raft address (join.go), and it
// promotes only when the voters that answer stay a majority
// (TestJoinChecksTheNode, TestJoinPromotesOnlyCaughtUp,
// TestJoinRefusesWithoutReachableQuorum). Each node's
// client API address is replicated state (the node registry, in
// snapshots), so any node can forward writes to the leader and fetch
// segments from peers (package catchup). A node whose data is wiped must
// rejoin under a new id (its old id's Raft log position is gone, and
// reusing the id could let it vote for entries it no longer has).
//
// The Raft port (package replication/transport) bounds its connections,
// and under peer TLS (package peer, Config.PeerTLS) admits only node
// certificates of the cluster CA whose node is a member (Node.raftMember);
// segments are served to nodes only, and a node joins only as itself
// (TestPeerTLSCluster, transport's TestStreamCap,
// TestSegmentsServedToNodesOnly). Raft's RPCs carry no identity bound to
// their connection, so the check is per connection (docs/security.md,
// "Peers"). Calls to peers' API ports, or to their peer listeners when
// they registered a peer address (Config.PeerAdvertise), take their
// scheme and TLS from peer.HTTP.
package replication
