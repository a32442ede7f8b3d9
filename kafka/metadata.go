package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/partition"
)

// clusterID is what Metadata gives as the cluster id.
const clusterID = "logd"

// metadata answers Metadata: every broker with its Kafka address, and for
// each topic asked (all when the list is null, or empty in version 0)
// its partitions, each led by the Raft leader with the voters as replicas.
// A topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION, unless the
// request allows auto-creation (always, before version 4) and the node
// allows it (Options.AutoCreateTopics): then it is created first.
//
// As in Kafka, a listing of every topic leaves out the topics the
// principal may not describe, and a topic asked by name or id that it may
// not describe is TOPIC_AUTHORIZATION_FAILED (whether it exists or not;
// one asked by id gets no name). Creating a topic needs create on it, as
// CreateTopics; without it a topic that does not exist is
// UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) metadata(ctx context.Context, rc *reqCtx, req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	view := s.cluster()
	for _, b := range view.brokers {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.id, b.host, b.port
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := clusterID
	resp.ClusterID = &cid
	resp.ControllerID = view.leader

	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	if all {
		for _, t := range s.b.Topics() {
			if rc.mayTopic(t.Name) {
				resp.Topics = append(resp.Topics, s.topicMetadata(rc, t, view))
			}
		}
		return resp
	}
	autoCreate := s.autoMake && (req.Version < 4 || req.AllowAutoTopicCreation)
	seen := map[string]bool{}
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			// A topic asked by id (version 10+).
			t, ok := s.topicByID(rt.TopicID)
			if ok && rc.mayTopic(t.Name) {
				resp.Topics = append(resp.Topics, s.topicMetadata(rc, t, view))
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = errUnknownTopicID
			if ok {
				mt.ErrorCode = errTopicAuthorizationFailed
			}
			rc.note(mt.ErrorCode)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		name := *rt.Topic
		if seen[name] {
			continue
		}
		seen[name] = true
		if !rc.mayTopic(name) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			mt.ErrorCode = errTopicAuthorizationFailed
			rc.note(mt.ErrorCode)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		t, err := s.b.Topic(name)
		if errors.Is(err, backend.ErrUnknownTopic) && autoCreate && rc.mayAutoCreate(name) {
			t, err = s.autoCreate(ctx, name)
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			mt.ErrorCode = codeFor(err, opRecords)
			if errors.Is(err, backend.ErrNotLeader) || errors.Is(err, backend.ErrTimeout) {
				// Auto-creation on a follower, or not committed in time:
				// retriable; the client asks again (the leader creates it).
				mt.ErrorCode = errLeaderNotAvailable
			}
			rc.note(mt.ErrorCode)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.topicMetadata(rc, t, view))
	}
	return resp
}

// topicByID finds a topic by its topic id.
func (s *Server) topicByID(id [16]byte) (backend.TopicInfo, bool) {
	for _, t := range s.b.Topics() {
		if topicID(t) == id {
			return t, true
		}
	}
	return backend.TopicInfo{}, false
}

// autoCreate creates a topic a Metadata request named, with the default
// partition count; a topic created meanwhile by another request is fine.
func (s *Server) autoCreate(ctx context.Context, name string) (backend.TopicInfo, error) {
	if err := partition.ValidateTopicName(name); err != nil {
		return backend.TopicInfo{}, err // INVALID_TOPIC_EXCEPTION, not the state machine's INVALID_REQUEST
	}
	t, err := s.b.CreateTopic(ctx, backend.CreateTopic{Name: name, Partitions: s.defParts})
	if errors.Is(err, backend.ErrTopicExists) {
		return s.b.Topic(name)
	}
	if err == nil {
		s.logger.Info("kafka: topic auto-created", "topic", name, "partitions", s.defParts)
	}
	return t, err
}

// topicMetadata describes one topic's partitions.
func (s *Server) topicMetadata(rc *reqCtx, t backend.TopicInfo, view clusterView) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = topicID(t)
	code := errNone
	if view.leader < 0 {
		code = errLeaderNotAvailable
		rc.note(code)
	}
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, t.Partitions)
	for p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.ErrorCode = code
		// A partition of a data group is led by the group's leader.
		var g uint64
		if int(p) < len(t.Placement) {
			g = t.Placement[p]
		}
		mp.Leader, mp.Replicas, mp.ISR = view.partition(t.Placement != nil, g)
		// The leader epoch stays unknown (-1): clients then skip the
		// truncation checks that would need OffsetForLeaderEpoch.
		mp.LeaderEpoch = -1
		mp.OfflineReplicas = []int32{}
		mt.Partitions[p] = mp
	}
	return mt
}
