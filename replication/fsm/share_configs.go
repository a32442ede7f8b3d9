package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
)

// Share-group settings (from ShareConfigLevel): the GROUP resource of the
// Kafka listener's IncrementalAlterConfigs and DescribeConfigs, Kafka's
// share.auto.offset.reset, share.record.lock.duration.ms and
// share.delivery.count.limit, kept per group in the meta group's state
// machine, so that every node answers them and a new meta leader creates
// queue groups by them (docs/kafka.md, "Share groups"). Only groups with
// a setting are kept; a setting not set is the listener's default.

// shareGroupConfigs is the share groups' settings; the Raft goroutine
// writes them, any goroutine reads.
type shareGroupConfigs struct {
	mu sync.RWMutex
	m  map[string]backend.ShareGroupConfig // guarded by mu; never a zero value
}

// ShareGroupConfig returns a share group's settings (the zero value when
// none is set).
func (f *FSM) ShareGroupConfig(name string) backend.ShareGroupConfig {
	f.shareConfigs.mu.RLock()
	defer f.shareConfigs.mu.RUnlock()
	return f.shareConfigs.m[name]
}

// ShareGroupConfigs returns the names of the groups with settings,
// sorted.
func (f *FSM) ShareGroupConfigs() []string {
	f.shareConfigs.mu.RLock()
	defer f.shareConfigs.mu.RUnlock()
	out := make([]string, 0, len(f.shareConfigs.m))
	for name := range f.shareConfigs.m {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// ValidateShareGroupConfig checks a change of a share group's settings as
// Apply does: a *backend.ShareConfigError when Apply would refuse it.
func ValidateShareGroupConfig(c AlterShareGroupConfig) error {
	_, err := changeShareConfig(backend.ShareGroupConfig{}, c)
	return err
}

// changeShareConfig returns cfg changed by c, or the change's first
// refusal (in the order of the settings' names, so that every replica
// answers the same).
func changeShareConfig(cfg backend.ShareGroupConfig, c AlterShareGroupConfig) (backend.ShareGroupConfig, error) {
	if err := group.ValidateName("group", c.Group); err != nil {
		return cfg, &backend.ShareConfigError{Group: c.Group, Reason: strings.TrimPrefix(err.Error(), group.ErrInvalidGroupRequest.Error()+": ")}
	}
	bad := func(name, value, reason string) error {
		return &backend.ShareConfigError{Group: c.Group, Name: name, Value: value, Reason: reason}
	}
	deleted := map[string]bool{}
	for _, name := range c.Delete {
		if deleted[name] {
			return cfg, bad(name, "", "deleted twice")
		}
		deleted[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(c.Set)) {
		v := c.Set[name]
		if deleted[name] {
			return cfg, bad(name, v, "both set and deleted")
		}
		switch name {
		case backend.ShareAutoOffsetReset:
			if v != "earliest" && v != "latest" {
				return cfg, bad(name, v, "want earliest or latest (logd has no by_duration)")
			}
			cfg.AutoOffsetReset = v
		case backend.ShareRecordLockDurationMs:
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 1 || ms > queue.MaxLease.Milliseconds() {
				return cfg, bad(name, v, fmt.Sprintf("want milliseconds in [1, %d]", queue.MaxLease.Milliseconds()))
			}
			cfg.RecordLockDuration = time.Duration(ms) * time.Millisecond
		case backend.ShareDeliveryCountLimit:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > queue.MaxDeliveriesLimit {
				return cfg, bad(name, v, fmt.Sprintf("want an integer in [1, %d]", queue.MaxDeliveriesLimit))
			}
			cfg.DeliveryCountLimit = n
		default:
			return cfg, bad(name, v, unknownShareSetting)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(deleted)) {
		switch name {
		case backend.ShareAutoOffsetReset:
			cfg.AutoOffsetReset = ""
		case backend.ShareRecordLockDurationMs:
			cfg.RecordLockDuration = 0
		case backend.ShareDeliveryCountLimit:
			cfg.DeliveryCountLimit = 0
		default:
			return cfg, bad(name, "", unknownShareSetting)
		}
	}
	return cfg, nil
}

// unknownShareSetting is the reason a setting logd does not take is
// refused with.
var unknownShareSetting = fmt.Sprintf("unknown: a share group takes %s, %s and %s",
	backend.ShareAutoOffsetReset, backend.ShareRecordLockDurationMs, backend.ShareDeliveryCountLimit)

// shareConfigsManifest is the share groups' settings in a snapshot, by
// group name.
type shareConfigsManifest struct {
	Groups []shareConfigManifest `json:"groups"`
}

type shareConfigManifest struct {
	Group           string `json:"group"`
	AutoOffsetReset string `json:"auto_offset_reset,omitempty"`
	LockMs          int64  `json:"record_lock_duration_ms,omitempty"`
	DeliveryLimit   int    `json:"delivery_count_limit,omitempty"`
}

// snapshotShareConfigs is the section of the snapshot; nil when no group
// has a setting, so that a snapshot of a cluster that never set one reads
// as before ShareConfigLevel.
func (f *FSM) snapshotShareConfigs() *shareConfigsManifest {
	f.shareConfigs.mu.RLock()
	defer f.shareConfigs.mu.RUnlock()
	if len(f.shareConfigs.m) == 0 {
		return nil
	}
	m := &shareConfigsManifest{Groups: make([]shareConfigManifest, 0, len(f.shareConfigs.m))}
	for name, c := range f.shareConfigs.m {
		m.Groups = append(m.Groups, shareConfigManifest{Group: name, AutoOffsetReset: c.AutoOffsetReset,
			LockMs: c.RecordLockDuration.Milliseconds(), DeliveryLimit: c.DeliveryCountLimit})
	}
	slices.SortFunc(m.Groups, func(a, b shareConfigManifest) int { return strings.Compare(a.Group, b.Group) })
	return m
}

// decodeShareConfigs checks a snapshot's section as a change would be
// checked, and returns the settings it holds.
func decodeShareConfigs(m *shareConfigsManifest) (map[string]backend.ShareGroupConfig, error) {
	out := map[string]backend.ShareGroupConfig{}
	if m == nil {
		return out, nil
	}
	for _, g := range m.Groups {
		set := map[string]string{}
		if g.AutoOffsetReset != "" {
			set[backend.ShareAutoOffsetReset] = g.AutoOffsetReset
		}
		if g.LockMs != 0 {
			set[backend.ShareRecordLockDurationMs] = strconv.FormatInt(g.LockMs, 10)
		}
		if g.DeliveryLimit != 0 {
			set[backend.ShareDeliveryCountLimit] = strconv.Itoa(g.DeliveryLimit)
		}
		cfg, err := changeShareConfig(backend.ShareGroupConfig{}, AlterShareGroupConfig{Group: g.Group, Set: set})
		if err != nil {
			return nil, fmt.Errorf("restore: share group settings: %w", err)
		}
		if _, dup := out[g.Group]; dup || cfg == (backend.ShareGroupConfig{}) {
			return nil, fmt.Errorf("restore: share group settings: group %q listed twice or with none", g.Group)
		}
		out[g.Group] = cfg
	}
	return out, nil
}

// installShareConfigs replaces the settings with a restored snapshot's.
func (f *FSM) installShareConfigs(m map[string]backend.ShareGroupConfig) {
	f.shareConfigs.mu.Lock()
	defer f.shareConfigs.mu.Unlock()
	f.shareConfigs.m = m
}
