package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/kafka"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/server"
)

// kafkaForwarder makes the Kafka listener's topic changes on the leader
// when this node does not lead (kafka.Forwarder): it calls the leader's
// Connect API as server's forwarder sends a follower's writes there, over
// the peer HTTP client (with this node's certificate under peer TLS),
// marked forwarded by this node, with the Kafka connection's principal in
// server.ForwardedPrincipalHeader when a certificate named it (the leader
// believes it only from a member's node certificate, and checks it
// against its ACLs again). Once the leader answers, it waits until this
// node applied the change too, so the client's next request here sees it.
type kafkaForwarder struct {
	b      *replication.Backend
	nodeID string
	peer   peer.HTTP
	http   *http.Client
}

func newKafkaForwarder(b *replication.Backend, nodeID string, p peer.HTTP) *kafkaForwarder {
	return &kafkaForwarder{b: b, nodeID: nodeID, peer: p, http: &http.Client{Transport: p.Transport(5*time.Second, false)}}
}

// call runs fn against the leader's API for principal p.
func (f *kafkaForwarder) call(ctx context.Context, p auth.Principal, req connect.AnyRequest, fn func(logdv1connect.LogServiceClient) error) error {
	addr, id := f.b.LeaderCallAddress()
	if addr == "" || id == f.nodeID {
		return backend.ErrNotLeader // none known, or this node leads now: the client asks again
	}
	req.Header().Set(server.ForwardedHeader, f.nodeID)
	if p != auth.Anonymous {
		// The Kafka listener's only credential is a certificate.
		req.Header().Set(server.ForwardedPrincipalHeader, "certificate "+p.String())
	}
	return fromLeader(fn(logdv1connect.NewLogServiceClient(f.http, f.peer.URL(addr))))
}

// CreateTopic implements kafka.Forwarder.
func (f *kafkaForwarder) CreateTopic(ctx context.Context, p auth.Principal, c backend.CreateTopic) (backend.TopicInfo, error) {
	req := connect.NewRequest(&logdv1.CreateTopicRequest{Name: c.Name, Partitions: c.Partitions, Config: c.Config})
	err := f.call(ctx, p, req, func(rpc logdv1connect.LogServiceClient) error { _, err := rpc.CreateTopic(ctx, req); return err })
	if err != nil {
		return backend.TopicInfo{}, err
	}
	var info backend.TopicInfo
	err = f.applied(ctx, func() bool { info, err = f.b.Topic(c.Name); return err == nil })
	return info, err
}

// InitProducerID implements kafka.Forwarder.
func (f *kafkaForwarder) InitProducerID(ctx context.Context, p auth.Principal, topic string) (int64, int16, error) {
	req := connect.NewRequest(&logdv1.InitProducerIdRequest{Topic: topic})
	var resp *connect.Response[logdv1.InitProducerIdResponse]
	err := f.call(ctx, p, req, func(rpc logdv1connect.LogServiceClient) error {
		var err error
		resp, err = rpc.InitProducerId(ctx, req)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return resp.Msg.ProducerId, int16(resp.Msg.ProducerEpoch), nil
}

// AlterTopic implements kafka.Forwarder.
func (f *kafkaForwarder) AlterTopic(ctx context.Context, p auth.Principal, c backend.AlterTopic) (backend.TopicInfo, error) {
	req := connect.NewRequest(&logdv1.AlterTopicRequest{Name: c.Name, Config: c.Config, DeleteConfig: c.Delete})
	var resp *connect.Response[logdv1.AlterTopicResponse]
	err := f.call(ctx, p, req, func(rpc logdv1connect.LogServiceClient) error {
		var err error
		resp, err = rpc.AlterTopic(ctx, req)
		return err
	})
	if err != nil {
		return backend.TopicInfo{}, err
	}
	want := resp.Msg.GetTopic().GetConfig()
	var info backend.TopicInfo
	err = f.applied(ctx, func() bool {
		info, err = f.b.Topic(c.Name)
		if err != nil {
			return false
		}
		for k, v := range want {
			if info.Config[k] != v {
				return false
			}
		}
		return true
	})
	return info, err
}

// DeleteTopic implements kafka.Forwarder.
func (f *kafkaForwarder) DeleteTopic(ctx context.Context, p auth.Principal, name string) error {
	req := connect.NewRequest(&logdv1.DeleteTopicRequest{Name: name})
	err := f.call(ctx, p, req, func(rpc logdv1connect.LogServiceClient) error { _, err := rpc.DeleteTopic(ctx, req); return err })
	if err != nil {
		return err
	}
	return f.applied(ctx, func() bool { _, err := f.b.Topic(name); return errors.Is(err, backend.ErrUnknownTopic) })
}

// CreatePartitions implements kafka.Forwarder.
func (f *kafkaForwarder) CreatePartitions(ctx context.Context, p auth.Principal, c backend.CreatePartitions) (backend.TopicInfo, error) {
	req := connect.NewRequest(&logdv1.CreatePartitionsRequest{Name: c.Name, Count: c.Count})
	err := f.call(ctx, p, req, func(rpc logdv1connect.LogServiceClient) error { _, err := rpc.CreatePartitions(ctx, req); return err })
	if err != nil {
		return backend.TopicInfo{}, err
	}
	var info backend.TopicInfo
	err = f.applied(ctx, func() bool { info, err = f.b.Topic(c.Name); return err == nil && info.Partitions >= c.Count })
	return info, err
}

// applied waits until done holds on this node, polling while ctx lasts.
func (f *kafkaForwarder) applied(ctx context.Context, done func() bool) error {
	for !done() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: the leader made the change; this node has not applied it yet", backend.ErrTimeout)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// leaderReasons maps the leader's refusals back to the backend's errors,
// which the Kafka listener maps to Kafka's codes (the listener checks a
// change here first, so the leader refuses only what changed since).
var leaderReasons = map[logdv1.Reason]error{
	logdv1.Reason_REASON_TOPIC_EXISTS:      backend.ErrTopicExists,
	logdv1.Reason_REASON_UNKNOWN_TOPIC:     backend.ErrUnknownTopic,
	logdv1.Reason_REASON_INVALID_ARGUMENT:  backend.ErrInvalidConfig,
	logdv1.Reason_REASON_NOT_LEADER:        backend.ErrNotLeader,
	logdv1.Reason_REASON_UNAVAILABLE:       backend.ErrNotLeader,
	logdv1.Reason_REASON_PERMISSION_DENIED: kafka.ErrLeaderDenied,
	logdv1.Reason_REASON_UNAUTHENTICATED:   kafka.ErrLeaderDenied,
}

// leaderError is a refusal of the leader: its message, and the backend's
// error it stands for.
type leaderError struct {
	msg string
	err error
}

func (e *leaderError) Error() string { return e.msg }
func (e *leaderError) Unwrap() error { return e.err }

// fromLeader turns the leader's answer into the backend's errors; one it
// does not know, or a failed call, is an unknown outcome (the change may
// have been made).
func fromLeader(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: forwarding to the leader: %v", backend.ErrTimeout, err)
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if info, ok := v.(*logdv1.ErrorInfo); derr == nil && ok {
			if sentinel, ok := leaderReasons[info.GetReason()]; ok {
				return &leaderError{msg: ce.Message(), err: sentinel}
			}
		}
	}
	return &leaderError{msg: "the leader: " + ce.Message(), err: backend.ErrTimeout}
}
