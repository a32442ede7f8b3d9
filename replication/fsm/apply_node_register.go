package fsm

// applyNodeRegister records (or replaces) a node's addresses and feature
// level. It is idempotent: re-applying the same registration changes
// nothing.
func (f *FSM) applyNodeRegister(_ uint64, _ int64, c NodeRegister) any {
	if c.ID == "" {
		return nil
	}
	f.nodes.set(RegisteredNode{ID: c.ID, APIAddress: c.APIAddress, FeatureLevel: c.FeatureLevel,
		PeerAddress: c.PeerAddress, KafkaAddress: c.KafkaAddress})
	return nil
}
