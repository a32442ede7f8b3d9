package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
)

// keyInitProducerID is InitProducerId's key.
const keyInitProducerID int16 = 22

// Kafka error codes of idempotent producers.
const (
	errCoordinatorLoadInProgress int16 = 14
	errOutOfOrderSequence        int16 = 45
	errInvalidProducerEpoch      int16 = 47
)

// initProducerID answers InitProducerId (docs/kafka.md, "Idempotent
// producers"). Without a transactional id it hands out a new producer
// id with epoch 0 from the cluster's allocator, as Kafka does for an
// idempotent producer whatever id and epoch the request names; with one
// it is refused as every transaction is (INVALID_REQUEST, as the
// FindCoordinator of a transaction key). The principal needs write on
// the cluster or on some topic (Kafka's IdempotentWrite, which write on
// any topic implies since KIP-679). Only the leader allocates; another
// node asks it through the Forwarder (forward.go), as Kafka's brokers
// take ids from their controller, since librdkafka asks one broker again
// and again: it would never get an id from a node that only refused.
// Without a Forwarder, or while no leader answers, a node answers
// COORDINATOR_LOAD_IN_PROGRESS, which every client retries, where
// NOT_COORDINATOR would send Java's producer looking for a transaction
// coordinator of no transactional id. Until every member's build
// judges idempotent batches (the backend's CheckIdempotence) the key is
// not advertised, and a request that comes anyway is
// UNSUPPORTED_VERSION.
func (s *Server) initProducerID(ctx context.Context, rc *reqCtx, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	may, topic := rc.mayIdempotentWrite(s.b)
	switch {
	case req.TransactionalID != nil:
		resp.ErrorCode = errInvalidRequest
	case !may:
		resp.ErrorCode = errClusterAuthorizationFailed
	case s.b.CheckIdempotence() != nil:
		resp.ErrorCode = errUnsupportedVersion
	case !s.waitReady(ctx) || !s.b.IsLeader() && s.forward == nil:
		resp.ErrorCode = errCoordinatorLoadInProgress
	default:
		var (
			id    int64
			epoch int16
			err   error
		)
		if s.b.IsLeader() {
			id, epoch, err = s.b.InitProducerID(ctx)
		} else {
			id, epoch, err = s.forward.InitProducerID(ctx, rc.c.principal, topic)
		}
		switch {
		case errors.Is(err, backend.ErrNotLeader):
			resp.ErrorCode = errCoordinatorLoadInProgress
		case err != nil:
			resp.ErrorCode = codeFor(err, opRecords)
		default:
			resp.ProducerID, resp.ProducerEpoch = id, epoch
		}
	}
	rc.note(resp.ErrorCode)
	return resp
}

// mayIdempotentWrite reports whether the request's principal may
// produce idempotently: write on the cluster (topic ""), or on a topic,
// which it returns (the leader checks the same right of a forwarded
// call).
func (rc *reqCtx) mayIdempotentWrite(b backend.Kafka) (bool, string) {
	if rc.mayCluster() {
		return true, ""
	}
	for _, t := range b.Topics() {
		if rc.mayTopic(t.Name) {
			return true, t.Name
		}
	}
	return false, ""
}
