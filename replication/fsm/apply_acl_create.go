package fsm

// applyACLCreate adds ACLs (those already present are kept once); the
// result is how many were new (an int).
func (f *FSM) applyACLCreate(_ uint64, _ int64, c aclCreate) any {
	next, added, err := f.security.planACLCreate(c.ACLs)
	if err != nil {
		return err
	}
	f.security.acls.Store(next)
	return added
}
