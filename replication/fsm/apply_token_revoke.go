package fsm

// applyTokenRevoke removes a token's verifier: the next call with the
// token is refused. The result is the revoked token's backend.TokenInfo.
func (f *FSM) applyTokenRevoke(_ uint64, _ int64, c tokenRevoke) any {
	next, r, err := f.security.planTokenRevoke(c.ID)
	if err != nil {
		return err
	}
	f.security.tokens.Store(&next)
	return r.info()
}
