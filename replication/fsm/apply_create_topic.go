package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/partition"
)

// validateCreateTopic checks a CreateTopic; the server calls it before
// proposing and Apply calls it again, so a bad command changes nothing.
func validateCreateTopic(c CreateTopic) (map[string]string, error) {
	if err := partition.ValidateTopicName(c.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", backend.ErrInvalidArgument, err)
	}
	if c.Partitions < 1 || c.Partitions > backend.MaxPartitions {
		return nil, fmt.Errorf("%w: partitions must be in [1, %d], got %d", backend.ErrInvalidArgument, backend.MaxPartitions, c.Partitions)
	}
	if c.Principal != "" {
		if err := validPrincipal(c.Principal); err != nil {
			return nil, invalid("create-topic principal", err)
		}
	}
	if err := validatePlacement(c.Placement, c.Partitions); err != nil {
		return nil, err
	}
	if c.Placement == nil && c.PlacementEpoch != 0 {
		return nil, fmt.Errorf("%w: placement epoch %d without a placement", backend.ErrInvalidArgument, c.PlacementEpoch)
	}
	return ResolveTopicConfig(c.Config)
}

func (f *FSM) applyCreateTopic(index uint64, now int64, c CreateTopic) any {
	cfg, err := validateCreateTopic(c)
	if err != nil {
		return err
	}
	if _, err := f.Topic(c.Name); err == nil {
		return fmt.Errorf("%w: %q", backend.ErrTopicExists, c.Name)
	}
	if err := f.CheckQuota(c); err != nil {
		return err
	}
	t := &Topic{Name: c.Name, Config: cfg, CreatedNanos: now, CreateIndex: index, CreatedBy: c.Principal,
		Placement: c.Placement, PlacementEpoch: c.PlacementEpoch, group: f.group}
	if err := openTopic(f.root, t, c.Partitions, f.logOpts); err != nil {
		return f.stop(fmt.Errorf("create topic %s at index %d: %w", c.Name, index, err))
	}
	f.mu.Lock()
	f.topics[c.Name] = t
	f.topicsArrivedLocked()
	f.mu.Unlock()
	return t
}

// ValidateCreateTopic checks a CreateTopic as Apply will, so a proposer can
// refuse a bad one before it reaches the Raft log.
func ValidateCreateTopic(c CreateTopic) error {
	_, err := validateCreateTopic(c)
	return err
}

// createTopicQuotaVersion is the create-topic payload that may carry a
// Quota. A build before QuotaLevel ignores a JSON field it does not know,
// and would create what the others refuse, so the quota gets a payload
// version of its own, which such a build refuses to apply (and which a
// node therefore proposes only once every member understands it).
const createTopicQuotaVersion = 2

// createTopicPrincipalVersion is the create-topic payload that may carry
// the creating principal and per-principal quotas: an older build would
// ignore them, so they too get a payload version of their own, at
// SecurityLevel.
const createTopicPrincipalVersion = 3

// createTopicQueueVersion is the create-topic payload that may set a topic
// setting of QueueLevel (queueLevelKey), which builds before refuse.
const createTopicQueueVersion = 4

// createTopicPlacementVersion is the create-topic payload that may carry
// a placement (DataGroupLevel): a build before would ignore it and open
// every partition.
const createTopicPlacementVersion = 5

// hasQueueLevelKey reports whether a config sets a key of QueueLevel.
func hasQueueLevelKey(cfg map[string]string, deleted []string) bool {
	for k := range cfg {
		if queueLevelKey(k) {
			return true
		}
	}
	for _, k := range deleted {
		if queueLevelKey(k) {
			return true
		}
	}
	return false
}

// TopicQuota bounds the topics of the cluster and their partitions, as
// counted when a create-topic is applied, in all and per principal. Zero
// bounds nothing.
type TopicQuota struct {
	MaxTopics     int64 `json:"max_topics,omitempty"`
	MaxPartitions int64 `json:"max_partitions,omitempty"`
	// MaxTopicsPerPrincipal and MaxPartitionsPerPrincipal bound the topics
	// a principal created and their partitions (payload version
	// createTopicPrincipalVersion). Topics created before principals were
	// recorded count for nobody.
	MaxTopicsPerPrincipal     int64 `json:"max_topics_per_principal,omitempty"`
	MaxPartitionsPerPrincipal int64 `json:"max_partitions_per_principal,omitempty"`
}

// IsZero reports whether q bounds nothing.
func (q TopicQuota) IsZero() bool {
	return q.MaxTopics <= 0 && q.MaxPartitions <= 0 && !q.perPrincipal()
}

// perPrincipal reports whether q bounds anything per principal.
func (q TopicQuota) perPrincipal() bool {
	return q.MaxTopicsPerPrincipal > 0 || q.MaxPartitionsPerPrincipal > 0
}

// CheckQuota reports whether creating c would pass c.Quota, counting the
// topics and partitions the state machine holds now (*backend.QuotaError). A
// proposer calls it to refuse early; Apply calls it again, and only
// Apply's answer is final (creations in flight are not counted here).
func (f *FSM) CheckQuota(c CreateTopic) error {
	if c.Quota == nil || c.Quota.IsZero() {
		return nil
	}
	topics, parts := f.TopicCounts()
	if q := c.Quota.MaxTopics; q > 0 && topics+1 > q {
		return &backend.QuotaError{Resource: "topics", Current: topics, Adding: 1, Limit: q}
	}
	if q := c.Quota.MaxPartitions; q > 0 && parts+int64(c.Partitions) > q {
		return &backend.QuotaError{Resource: "partitions", Current: parts, Adding: int64(c.Partitions), Limit: q}
	}
	if c.Principal == "" || !c.Quota.perPrincipal() {
		return nil
	}
	topics, parts = f.PrincipalTopicCounts(c.Principal)
	if q := c.Quota.MaxTopicsPerPrincipal; q > 0 && topics+1 > q {
		return &backend.QuotaError{Resource: "topics", Principal: c.Principal, Current: topics, Adding: 1, Limit: q}
	}
	if q := c.Quota.MaxPartitionsPerPrincipal; q > 0 && parts+int64(c.Partitions) > q {
		return &backend.QuotaError{Resource: "partitions", Principal: c.Principal, Current: parts, Adding: int64(c.Partitions), Limit: q}
	}
	return nil
}

// TopicCounts returns the number of topics and of their partitions.
func (f *FSM) TopicCounts() (topics, partitions int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, t := range f.topics {
		partitions += int64(len(t.Partitions))
	}
	return int64(len(f.topics)), partitions
}

// PrincipalTopicCounts returns the number of topics principal created
// ("User:alice") and of their partitions.
func (f *FSM) PrincipalTopicCounts(principal string) (topics, partitions int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, t := range f.topics {
		if t.CreatedBy == principal {
			topics++
			partitions += int64(len(t.Partitions))
		}
	}
	return topics, partitions
}

// decodeCreateTopic reads a create-topic payload. Version 1 never carries
// a quota, and only version 3 a principal or a per-principal quota: an
// entry that did would be applied with them by this build and without
// them by an older one.
func decodeCreateTopic(p []byte, version byte, _ *keyScratch) (CreateTopic, error) {
	var c CreateTopic
	if err := json.Unmarshal(p, &c); err != nil {
		return c, fmt.Errorf("%w: create-topic: %v", backend.ErrBadCommand, err)
	}
	if version == commandVersion && c.Quota != nil {
		return c, fmt.Errorf("%w: create-topic version %d with a quota", backend.ErrBadCommand, version)
	}
	if version < createTopicPrincipalVersion && (c.Principal != "" || c.Quota != nil && c.Quota.perPrincipal()) {
		return c, fmt.Errorf("%w: create-topic version %d with a principal or a per-principal quota", backend.ErrBadCommand, version)
	}
	if version < createTopicQueueVersion && hasQueueLevelKey(c.Config, nil) {
		return c, fmt.Errorf("%w: create-topic version %d with a setting of feature level %d", backend.ErrBadCommand, version, QueueLevel)
	}
	if version < createTopicPlacementVersion && (c.Placement != nil || c.PlacementEpoch != 0) {
		return c, fmt.Errorf("%w: create-topic version %d with a placement", backend.ErrBadCommand, version)
	}
	return c, nil
}

// EncodeCreateTopic encodes a create-topic stamped with now: in payload
// version 1 without a quota, in createTopicQuotaVersion (QuotaLevel) with
// one, in createTopicPrincipalVersion (SecurityLevel) with a principal or
// a per-principal quota, in createTopicQueueVersion (QueueLevel) with a
// setting of that level.
func EncodeCreateTopic(now int64, c CreateTopic) ([]byte, error) {
	data, err := encodeJSONCommand(CmdCreateTopic, now, c)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Placement != nil || c.PlacementEpoch != 0:
		data[1] = createTopicPlacementVersion
	case hasQueueLevelKey(c.Config, nil):
		data[1] = createTopicQueueVersion
	case c.Principal != "" || c.Quota != nil && c.Quota.perPrincipal():
		data[1] = createTopicPrincipalVersion
	case c.Quota != nil:
		data[1] = createTopicQuotaVersion
	}
	return data, nil
}
