package fsm

// applyNodeRegister records (or replaces) a node's addresses and feature
// level. It is idempotent: re-applying the same registration changes
// nothing.
func (f *FSM) applyNodeRegister(_ uint64, _ int64, c NodeRegister) any {
	if c.ID == "" {
		return nil
	}
	n := RegisteredNode(c)
	if cur, ok := f.nodes.get(c.ID); f.snapshotted.Load() && (!ok || cur.CallAddress() != n.CallAddress()) {
		// The latest snapshot names this node at no or another address,
		// so a follower installing it could not fetch segments here.
		f.segmentsChanged.Store(true)
	}
	f.nodes.set(n)
	return nil
}
