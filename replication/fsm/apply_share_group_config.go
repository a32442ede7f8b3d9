package fsm

import "github.com/logd-dev/logd/backend"

// AlterShareGroupConfig sets and deletes settings of a share group
// (share_configs.go), at ShareConfigLevel: the Kafka listener proposes it
// for IncrementalAlterConfigs of a GROUP resource. Set holds Kafka's
// names and values as the request wrote them; Delete names settings that
// go back to their defaults. The change is checked whole against the
// settings' bounds (ValidateShareGroupConfig) and applied whole, or
// refused with a *backend.ShareConfigError and nothing changed. A group
// left with no setting is forgotten. The result is the group's settings
// after the change (backend.ShareGroupConfig).
type AlterShareGroupConfig struct {
	Group  string            `json:"group"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

func (f *FSM) applyShareGroupConfig(_ uint64, _ int64, c AlterShareGroupConfig) any {
	f.shareConfigs.mu.Lock()
	defer f.shareConfigs.mu.Unlock()
	cfg, err := changeShareConfig(f.shareConfigs.m[c.Group], c)
	if err != nil {
		return err
	}
	if cfg == (backend.ShareGroupConfig{}) {
		delete(f.shareConfigs.m, c.Group)
		return cfg
	}
	if f.shareConfigs.m == nil {
		f.shareConfigs.m = map[string]backend.ShareGroupConfig{}
	}
	f.shareConfigs.m[c.Group] = cfg
	return cfg
}
