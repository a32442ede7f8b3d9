package fsm

// applyNodeDeregister forgets a node's API address; unknown ids are
// ignored, so re-applying is harmless.
func (f *FSM) applyNodeDeregister(_ uint64, _ int64, c NodeDeregister) any {
	f.nodes.remove(c.ID)
	return nil
}
