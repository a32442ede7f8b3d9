package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/partition"
)

// adminTimeout is an administrative request's commit deadline when it gives
// none.
const adminTimeout = 30 * time.Second

// adminContext bounds an administrative write by the request's timeout.
func adminContext(ctx context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	d := time.Duration(timeoutMs) * time.Millisecond
	if d <= 0 {
		d = adminTimeout
	}
	return context.WithTimeout(ctx, d)
}

// createTopics answers CreateTopics on any node: the leader (the
// controller Metadata names) creates the topics, another node forwards
// them to it (forward.go; without a Forwarder, NOT_CONTROLLER, and the
// client asks the leader). logd
// replicates every partition to every voter, so a replication factor up
// to the voters' count is accepted but not applied (the response gives
// the voters' count), one above it is INVALID_REPLICATION_FACTOR, as
// Kafka answers a factor above its brokers' count, and a manual replica
// assignment is refused. The settings are
// logd's topic settings, named as Kafka's (docs/kafka.md lists them). A
// topic the principal may not create is TOPIC_AUTHORIZATION_FAILED;
// every topic's outcome has a line in the audit log, unless the request
// only validates.
func (s *Server) createTopics(ctx context.Context, rc *reqCtx, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	w := rc.writer(s.waitReady(ctx) && s.b.IsLeader())
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	replicas := int16(len(s.cluster().replicas))
	actx, cancel := adminContext(ctx, req.TimeoutMillis)
	defer cancel()
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		var code int16
		var msg string
		switch {
		case count[t.Topic] > 1:
			code, msg = errInvalidRequest, "topic named more than once in the request"
		case !rc.mayTopic(t.Topic):
			code = errTopicAuthorizationFailed
		case w == nil && !req.ValidateOnly:
			code = errNotController
		default:
			var info backend.TopicInfo
			info, code, msg = s.createTopic(actx, w, t, req.ValidateOnly, replicas)
			if code == errNone {
				rt.TopicID = topicID(info)
				rt.NumPartitions = info.Partitions
				rt.ReplicationFactor = replicas
				defaults := s.b.TopicConfigDefaults()
				for _, k := range sortedKeys(info.Config) {
					c := kmsg.NewCreateTopicsResponseTopicConfig()
					c.Name = k
					v := info.Config[k]
					c.Value = &v
					c.Source = int8(configSource(k, v, defaults))
					rt.Configs = append(rt.Configs, c)
				}
			}
		}
		rt.ErrorCode = code
		if msg != "" {
			rt.ErrorMessage = &msg
		}
		rc.note(code)
		if !req.ValidateOnly {
			rc.audit([]slog.Attr{slog.String("topic", t.Topic), slog.Int("partitions", int(t.NumPartitions)), configsAttr(t.Configs)}, code, msg)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// configsAttr lists a CreateTopics topic's settings for the audit log.
func configsAttr(cfgs []kmsg.CreateTopicsRequestTopicConfig) slog.Attr {
	kv := make([]string, 0, len(cfgs))
	for _, c := range cfgs {
		v := "null"
		if c.Value != nil {
			v = *c.Value
		}
		kv = append(kv, c.Name+"="+v)
	}
	slices.Sort(kv)
	return slog.String("config", strings.Join(kv, ","))
}

// createTopic creates (or only validates, here) one topic through w; for
// a validation the returned info is the topic as it would be created.
func (s *Server) createTopic(ctx context.Context, w topicWriter, t kmsg.CreateTopicsRequestTopic, validateOnly bool, voters int16) (backend.TopicInfo, int16, string) {
	if err := partition.ValidateTopicName(t.Topic); err != nil {
		return backend.TopicInfo{}, errInvalidTopic, errorMessage(err)
	}
	if len(t.ReplicaAssignment) > 0 {
		return backend.TopicInfo{}, errInvalidReplicaAssignment, "logd places every partition on every voter; leave the replica assignment empty"
	}
	parts := t.NumPartitions
	if parts == -1 {
		parts = s.defParts
	}
	if parts < 1 {
		return backend.TopicInfo{}, errInvalidPartitions, fmt.Sprintf("%d partitions: want at least 1 (or -1 for the default)", t.NumPartitions)
	}
	if t.ReplicationFactor == 0 || t.ReplicationFactor < -1 {
		return backend.TopicInfo{}, errInvalidReplicationFactor, fmt.Sprintf("replication factor %d: want at least 1 (or -1); logd replicates to every voter", t.ReplicationFactor)
	}
	if voters > 0 && t.ReplicationFactor > voters {
		return backend.TopicInfo{}, errInvalidReplicationFactor, fmt.Sprintf("replication factor %d: larger than the cluster's %d voters (logd replicates to every voter)", t.ReplicationFactor, voters)
	}
	c := backend.CreateTopic{Name: t.Topic, Partitions: parts, Config: map[string]string{}}
	for _, kv := range t.Configs {
		if kv.Value == nil {
			continue // null: the default
		}
		c.Config[kv.Name] = *kv.Value
	}
	code := func(err error) (backend.TopicInfo, int16, string) {
		code := codeFor(err, opAdmin)
		if errors.Is(err, backend.ErrInvalidArgument) {
			code = errInvalidPartitions // the name is checked above
		}
		return backend.TopicInfo{}, code, errorMessage(err)
	}
	if validateOnly {
		if err := s.b.ValidateCreateTopic(c); err != nil {
			return code(err)
		}
		info := backend.TopicInfo{Name: c.Name, Partitions: c.Partitions, Config: s.b.TopicConfigDefaults()}
		for k, v := range c.Config {
			info.Config[k] = v
		}
		return info, errNone, ""
	}
	if err := s.b.ValidateCreateTopic(c); err != nil {
		return code(err) // checked here too: the precise code, no hop
	}
	info, err := w.CreateTopic(ctx, c)
	if err != nil {
		return code(err)
	}
	s.logger.Info("kafka: topic created", "topic", c.Name, "partitions", c.Partitions, "config", c.Config)
	return info, errNone, ""
}

// deleteTopics answers DeleteTopics on the leader, and on another node
// through it (forward.go; NOT_CONTROLLER without a Forwarder). Topics named by id (version 6+) are looked up among the
// topics' ids (topicID). A topic the principal may not delete is
// TOPIC_AUTHORIZATION_FAILED (named by id, its name is not given); every
// topic's outcome has a line in the audit log.
func (s *Server) deleteTopics(ctx context.Context, rc *reqCtx, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	w := rc.writer(s.waitReady(ctx) && s.b.IsLeader())
	type target struct {
		name string
		id   [16]byte
		byID bool
	}
	var targets []target
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: n})
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil && *t.Topic != "" {
				targets = append(targets, target{name: *t.Topic})
			} else {
				targets = append(targets, target{id: t.TopicID, byID: true})
			}
		}
	}
	actx, cancel := adminContext(ctx, req.TimeoutMillis)
	defer cancel()
	for _, t := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.TopicID = t.id
		name := t.name
		if t.byID {
			info, _ := s.topicByID(t.id)
			name = info.Name
		}
		var err error
		switch {
		case name != "" && !rc.mayTopic(name):
			rt.ErrorCode = errTopicAuthorizationFailed
			if t.byID {
				name = ""
			}
		case w == nil:
			rt.ErrorCode = errNotController
		case name == "":
			rt.ErrorCode = errUnknownTopicOrPartition
			if t.byID {
				rt.ErrorCode = errUnknownTopicID
			}
		default:
			if err = w.DeleteTopic(actx, name); err != nil {
				rt.ErrorCode = codeFor(err, opAdmin)
			} else {
				s.logger.Info("kafka: topic deleted", "topic", name)
			}
		}
		if name != "" {
			rt.Topic = &name
		}
		var msg string
		if err != nil {
			msg = errorMessage(err)
			if req.Version >= 5 {
				rt.ErrorMessage = &msg
			}
		}
		rc.note(rt.ErrorCode)
		target := []slog.Attr{slog.String("topic", name)}
		if t.byID {
			target = append(target, slog.String("topic_id", fmt.Sprintf("%x", t.id)))
		}
		rc.audit(target, rt.ErrorCode, msg)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
