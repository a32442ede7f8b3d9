package replication

import (
	"context"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// stampCreateTopic sets what the proposer adds to a topic creation: the
// creating principal, taken from ctx (backend.PrincipalFrom; whatever the caller
// put in c is replaced; one that is not a valid principal is not
// recorded), and this node's quota (Config.Quota), checked
// here first against the applied state. Each goes into the command only
// once every member understands it (features.go): the quota from
// fsm.QuotaLevel, the principal and the per-principal bounds from
// fsm.SecurityLevel. Before that, only this check applies the quota, and
// a topic records no principal: it counts for nobody, so the per-principal
// bounds start counting at SecurityLevel.
func (b *Backend) stampCreateTopic(ctx context.Context, c *fsm.CreateTopic) error {
	c.Quota, c.Principal = nil, ""
	if p := backend.PrincipalFrom(ctx); auth.ValidName(p.Name) == nil && (p.Type == auth.TypeUser || p.Type == auth.TypeNode) {
		c.Principal = p.String()
	}
	level, levelErr := b.featureLevel()
	if !b.cfg.Quota.IsZero() {
		q := fsm.TopicQuota(b.cfg.Quota)
		c.Quota = &q
		if err := b.fsm.CheckQuota(*c); err != nil {
			return err
		}
	}
	if levelErr == nil && level >= fsm.SecurityLevel {
		return nil
	}
	c.Principal = ""
	if c.Quota == nil {
		return nil
	}
	if levelErr != nil || level < fsm.QuotaLevel {
		c.Quota = nil
		return nil
	}
	q := *c.Quota
	q.MaxTopicsPerPrincipal, q.MaxPartitionsPerPrincipal = 0, 0
	c.Quota = nil
	if !q.IsZero() {
		c.Quota = &q
	}
	return nil
}
