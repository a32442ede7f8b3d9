package fsm

// applyTokenCreate stores a token's verifier. The state machine's time
// (now) decides which tokens have expired when room must be made
// (planTokenCreate), so every replica drops the same ones.
func (f *FSM) applyTokenCreate(_ uint64, now int64, r tokenRecord) any {
	next, err := f.security.planTokenCreate(r, now/1e6)
	if err != nil {
		return err
	}
	f.security.tokens.Store(&next)
	return r.info()
}
