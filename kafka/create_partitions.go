package kafka

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/logd-dev/logd/backend"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyCreatePartitions is CreatePartitions' API key.
const keyCreatePartitions int16 = 37

// createPartitions answers CreatePartitions on the leader, and on another
// node through it (forward.go; without a Forwarder NOT_CONTROLLER, and the
// client asks the controller Metadata names): each
// topic grows to its Count in one Raft command (replication.Backend
// CreatePartitions), its new partitions empty at offset 0, and the next
// Metadata lists them, so clients pick them up at their metadata refresh.
// What Kafka refuses, logd refuses with Kafka's codes: a count not above
// the topic's (INVALID_PARTITIONS, also for the count it has, where logd's
// own API answers success), one above the per-topic limit
// (INVALID_PARTITIONS), a manual replica assignment (logd places every
// partition on every voter: INVALID_REPLICA_ASSIGNMENT), the cluster's
// partition quota (POLICY_VIOLATION); alter on the topic is needed
// (TOPIC_AUTHORIZATION_FAILED). Every topic's outcome has a line in the
// audit log, unless the request only validates.
func (s *Server) createPartitions(ctx context.Context, rc *reqCtx, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	w := rc.writer(s.waitReady(ctx) && s.b.IsLeader())
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	actx, cancel := adminContext(ctx, req.TimeoutMillis)
	defer cancel()
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
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
			code, msg = s.growTopic(actx, w, t, req.ValidateOnly)
		}
		rt.ErrorCode = code
		if msg != "" {
			rt.ErrorMessage = &msg
		}
		rc.note(code)
		if !req.ValidateOnly {
			rc.audit([]slog.Attr{slog.String("topic", t.Topic), slog.Int("count", int(t.Count))}, code, msg)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// growTopic grows through w (or only validates, here, the growth of) one
// topic.
func (s *Server) growTopic(ctx context.Context, w topicWriter, t kmsg.CreatePartitionsRequestTopic, validateOnly bool) (int16, string) {
	if len(t.Assignment) > 0 {
		return errInvalidReplicaAssignment, "logd places every partition on every voter; leave the assignment empty"
	}
	info, err := s.b.Topic(t.Topic)
	if err != nil {
		return codeFor(err, opAdmin), errorMessage(err)
	}
	if t.Count == info.Partitions {
		return errInvalidPartitions, fmt.Sprintf("topic %s already has %d partitions", t.Topic, info.Partitions)
	}
	c := backend.CreatePartitions{Name: t.Topic, Count: t.Count}
	err = s.b.ValidateCreatePartitions(c) // here too when forwarding: the precise code
	if err == nil && !validateOnly {
		_, err = w.CreatePartitions(ctx, c)
	}
	if err != nil {
		return codeFor(err, opAdmin), errorMessage(err)
	}
	if !validateOnly {
		s.logger.Info("kafka: topic partitions added", "topic", t.Topic, "from", info.Partitions, "to", t.Count)
	}
	return errNone, ""
}
