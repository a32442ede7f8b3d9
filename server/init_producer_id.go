package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// producerIDs is the part of the backend that hands out Kafka producer
// ids (replication.Backend).
type producerIDs interface {
	InitProducerID(ctx context.Context) (int64, int16, error)
}

// InitProducerId hands out a Kafka producer id from the cluster's
// allocator, on the leader (followers forward the call): the Kafka
// listener of a follower asks it for its clients' InitProducerId
// (kafka.Forwarder). The caller needs write on the topic it names, or on
// the cluster (authz.go).
func (s *Server) InitProducerId(ctx context.Context, _ *connect.Request[logdv1.InitProducerIdRequest]) (*connect.Response[logdv1.InitProducerIdResponse], error) {
	b, ok := s.b.(producerIDs)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this node hands out no Kafka producer ids"))
	}
	id, epoch, err := b.InitProducerID(ctx)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.InitProducerIdResponse{ProducerId: id, ProducerEpoch: int32(epoch)}), nil
}
