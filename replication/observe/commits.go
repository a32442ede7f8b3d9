package observe

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// The leader's commit index as this node hears it, for readiness
// (package replication, Node.caughtUp). A follower's own commit index is not the leader's:
// hashicorp/raft cuts the leader's to the last entry the follower holds.
// A node that replays a long log (added with fresh data while the leader
// still holds every entry it needs, or restarted after a long absence)
// receives it in batches of MaxAppendEntries, and after each one it has
// applied "its" commit index, an entry of the current term when no
// election happened since; ready then, it would serve reads far behind
// what the cluster committed, and served, before it started. Every
// AppendEntries but a heartbeat carries the leader's commit index as the
// leader sent it, and the transport wrapper notes it before Raft handles
// the request, so a node waits for a commit index of the leader taken
// after it started (docs/faults.md, follower reads).

// termIndex is a commit index and the term of the leader that sent it.
type termIndex struct{ term, index uint64 }

// LeaderCommits keeps, for the newest term an AppendEntries arrived in,
// the commit index the first one of that term carried. The first, not
// the latest: under steady writes the latest moves on as fast as the
// node applies, and a node waiting for it might never be ready. Safe for
// concurrent use.
type LeaderCommits struct {
	p atomic.Pointer[termIndex]
}

// note records the commit index of an AppendEntries of term, unless one
// of term or a newer term was noted; a zero index (a heartbeat, or a
// leader with nothing committed) says nothing.
func (c *LeaderCommits) note(term, index uint64) {
	if index == 0 {
		return
	}
	for {
		old := c.p.Load()
		if old != nil && term <= old.term {
			return
		}
		if c.p.CompareAndSwap(old, &termIndex{term: term, index: index}) {
			return
		}
	}
}

// In returns the commit index noted for term, and whether one was.
func (c *LeaderCommits) In(term uint64) (uint64, bool) {
	if ti := c.p.Load(); ti != nil && ti.term == term {
		return ti.index, true
	}
	return 0, false
}

// Consumer implements raft.Transport: the requests the wrapped transport
// received, each passed on by Forward once noted.
func (t *Transport) Consumer() <-chan raft.RPC { return t.rpcs }

// Forward passes the requests the wrapped transport receives on to
// Consumer's channel, in order, noting the leader's commit index of each
// AppendEntries first, until stop is closed; a request it holds then is
// answered ErrRaftShutdown. The node runs it from the start of Raft until
// Raft has shut down.
func (t *Transport) Forward(stop <-chan struct{}) {
	in := t.Transport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case <-stop:
			return
		case rpc = <-in:
		}
		if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
			t.commits.note(req.Term, req.LeaderCommitIndex)
			rpc.Command = clampCommit(req)
		}
		select {
		case t.rpcs <- rpc:
		case <-stop:
			rpc.Respond(emptyResponse(rpc.Command), raft.ErrRaftShutdown)
			return
		}
	}
}

// clampCommit returns req, or a copy of it whose leader's commit index is
// cut to the last entry the request vouches for: its previous entry plus
// its entries. hashicorp/raft commits on a follower up to the leader's
// commit index or its own last entry, whichever is lower; but the entries
// past this request's last may be a deposed leader's own that the new
// leader never sent, and it would apply them as committed. The Raft paper
// takes the lower of the leader's commit index and the index of the last
// new entry, which is what the cut gives (docs/faults.md). A follower that
// is caught up gets requests whose previous entry is the leader's last,
// so its commit index still follows the leader's.
func clampCommit(req *raft.AppendEntriesRequest) *raft.AppendEntriesRequest {
	last := req.PrevLogEntry + uint64(len(req.Entries))
	if req.LeaderCommitIndex <= last {
		return req
	}
	// A copy: an in-memory transport hands over the sender's own request.
	cp := *req
	cp.LeaderCommitIndex = last
	return &cp
}

// emptyResponse is a zero response of the type a request's sender
// expects: hashicorp/raft's in-memory pipeline copies the response before
// it looks at the error, and a nil one panics its decoding goroutine.
func emptyResponse(cmd any) any {
	switch cmd.(type) {
	case *raft.AppendEntriesRequest:
		return &raft.AppendEntriesResponse{}
	case *raft.RequestVoteRequest:
		return &raft.RequestVoteResponse{}
	case *raft.RequestPreVoteRequest:
		return &raft.RequestPreVoteResponse{}
	case *raft.InstallSnapshotRequest:
		return &raft.InstallSnapshotResponse{}
	case *raft.TimeoutNowRequest:
		return &raft.TimeoutNowResponse{}
	}
	return nil
}
