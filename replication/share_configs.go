package replication

import (
	"context"
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// Kafka share groups' settings (fsm.AlterShareGroupConfig, at
// fsm.ShareConfigLevel) live in the meta group: every node reads them
// from its replica, the meta leader changes them.

// ShareGroupConfig returns a share group's settings as this node's replica
// of the meta group applied them.
func (b *Backend) ShareGroupConfig(group string) backend.ShareGroupConfig {
	return b.fsm.ShareGroupConfig(group)
}

// ValidateShareGroupConfig checks a change of a share group's settings as
// AlterShareGroupConfig does, writing nothing: the change itself
// (*backend.ShareConfigError), then the cluster's feature level
// (*backend.FeatureLevelError).
func (b *Backend) ValidateShareGroupConfig(c backend.AlterShareGroupConfig) error {
	if err := fsm.ValidateShareGroupConfig(fsm.AlterShareGroupConfig(c)); err != nil {
		return err
	}
	cluster, err := b.featureLevel()
	if err != nil {
		return err
	}
	return allows(fsm.CmdShareGroupConfig.String(), fsm.ShareConfigLevel, cluster)
}

// AlterShareGroupConfig proposes a change of a share group's settings to
// the meta group and returns the settings once it is committed and
// applied. A bad change is refused here, and by every replica.
func (b *Backend) AlterShareGroupConfig(ctx context.Context, c backend.AlterShareGroupConfig) (backend.ShareGroupConfig, error) {
	if err := fsm.ValidateShareGroupConfig(fsm.AlterShareGroupConfig(c)); err != nil {
		return backend.ShareGroupConfig{}, err
	}
	data, err := fsm.EncodeJSON(fsm.CmdShareGroupConfig, b.cfg.Now().UnixNano(), fsm.AlterShareGroupConfig(c))
	if err != nil {
		return backend.ShareGroupConfig{}, err
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return backend.ShareGroupConfig{}, err
	}
	cfg, ok := res.(backend.ShareGroupConfig)
	if !ok {
		return backend.ShareGroupConfig{}, fmt.Errorf("share group config: unexpected result %T", res)
	}
	return cfg, nil
}
