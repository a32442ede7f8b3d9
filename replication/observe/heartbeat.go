package observe

import (
	"github.com/hashicorp/raft"
)

// Heartbeats that raise the term go through Raft's main loop.
//
// hashicorp/raft handles a heartbeat (an AppendEntries without entries,
// previous entry or commit index) on the transport's connection goroutine,
// beside its main loop, so that a follower busy writing its log still
// answers in time (SetHeartbeatHandler). A heartbeat from the leader of a
// newer term makes that goroutine raise the node's term and turn it into a
// follower, while the main loop may still be leading the old term: it then
// writes the client entries it is dispatching with the new term, entries
// the new leader never sent. They pass for the new leader's at the same
// index and are applied as committed, and the replicas' state diverges.
// The Transport wrapper therefore keeps the fast
// path only for heartbeats of a term the node is already in, the steady
// state; one of a newer term goes through Consumer, where the main loop
// steps down before it dispatches anything more (docs/faults.md).

// SetHeartbeatHandler implements raft.Transport: heartbeats of a term
// newer than the node's (or any, until SetTerm) are passed to Raft's main
// loop through Consumer rather than to cb.
func (t *Transport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		t.Transport.SetHeartbeatHandler(nil)
		return
	}
	t.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && t.fastPath(req.Term) {
			cb(rpc)
			return
		}
		select {
		case t.rpcs <- rpc:
		case <-t.stop:
			rpc.Respond(emptyResponse(rpc.Command), raft.ErrRaftShutdown)
		}
	})
}

// SetTerm gives the wrapper the node's current term (raft.Raft.CurrentTerm),
// once Raft is made.
func (t *Transport) SetTerm(term func() uint64) { t.term.Store(&term) }

// fastPath reports whether a heartbeat of term may take Raft's fast path:
// the node is in that term already, so the heartbeat changes neither its
// term nor a leader's role.
func (t *Transport) fastPath(term uint64) bool {
	cur := t.term.Load()
	return cur != nil && term <= (*cur)()
}
