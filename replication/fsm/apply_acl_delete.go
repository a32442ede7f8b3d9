package fsm

import "github.com/logd-dev/logd/auth"

// applyACLDelete removes the ACLs the filter matches; the result is the
// removed ones ([]auth.ACL, in the set's order; empty when none matched).
func (f *FSM) applyACLDelete(_ uint64, _ int64, flt auth.Filter) any {
	cur := f.security.aclSet()
	removed := matchACLs(cur, flt)
	if len(removed) == 0 {
		return []auth.ACL{}
	}
	next, removed := cur.Without(removed)
	f.security.acls.Store(next)
	return removed
}
