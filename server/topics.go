package server

import (
	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/replication"
)

// topicInfo converts an applied topic to its API form.
func topicInfo(t *replication.Topic) *logdv1.TopicInfo {
	cfg := make(map[string]string, len(t.Config))
	for k, v := range t.Config {
		cfg[k] = v
	}
	return &logdv1.TopicInfo{
		Name:       t.Name,
		Partitions: int32(len(t.Partitions)),
		Config:     cfg,
		CreatedMs:  t.CreatedNanos / 1e6,
	}
}
