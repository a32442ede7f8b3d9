package server

import (
	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// topicInfo converts a topic to its API form; it keeps t.Config, a copy
// the backend handed over.
func topicInfo(t backend.TopicInfo) *logdv1.TopicInfo {
	return &logdv1.TopicInfo{
		Name:       t.Name,
		Partitions: t.Partitions,
		Config:     t.Config,
		CreatedMs:  t.CreatedNanos / 1e6,
	}
}
