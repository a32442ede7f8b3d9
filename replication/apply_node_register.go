package replication

// applyNodeRegister records (or replaces) a node's API address. It is
// idempotent: re-applying the same registration changes nothing.
func (f *FSM) applyNodeRegister(c NodeRegister) any {
	if c.ID == "" {
		return nil
	}
	f.nodes.set(c.ID, c.APIAddress)
	return nil
}
