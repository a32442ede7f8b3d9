package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Old versions of the data path (docs/kafka.md, "Old API versions").
// Produce before 3 and Fetch before 4 carry the message formats before
// RecordBatch v2 (Kafka 4 removed them, KIP-896), and ListOffsets 0 the
// offsets list of Kafka 0.10.0: logd serves none of them. A client pinned
// to such a version (sarama's Version V0_10_0_0, kafka-python's
// api_version=(0,10,1)) sends it although ApiVersions lists a higher
// minimum. Kafka 4 closes the connection, which the producer sees as a
// socket error and retries, and a consumer as an empty read; logd answers
// instead, at the request's own version, which the client reads, with
// UNSUPPORTED_VERSION for every partition, so the error reaches the
// application. Any other unserved key or version still closes the
// connection, as Kafka does.

// answeredOld reports whether key at version is an old version of the
// data path answered UNSUPPORTED_VERSION rather than closed.
func answeredOld(key, version int16) bool {
	switch key {
	case keyProduce:
		return version >= 0 && version < 3
	case keyFetch:
		return version >= 0 && version < 4
	case keyListOffsets:
		return version == 0
	}
	return false
}

// unsupportedOld answers an old version's request (answeredOld) with
// UNSUPPORTED_VERSION for every partition it names, at its version; a
// produce with acks 0 gets no answer (nil), as any produce with acks 0.
func unsupportedOld(rc *reqCtx, req kmsg.Request) kmsg.Response {
	rc.note(errUnsupportedVersion)
	switch req := req.(type) {
	case *kmsg.ProduceRequest:
		if req.Acks == 0 {
			return nil
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.Topics = each(req.Topics, func(t kmsg.ProduceRequestTopic) kmsg.ProduceResponseTopic {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			rt.Partitions = each(t.Partitions, func(p kmsg.ProduceRequestTopicPartition) kmsg.ProduceResponseTopicPartition {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, errUnsupportedVersion, -1
				return rp
			})
			return rt
		})
		return resp
	case *kmsg.FetchRequest:
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Topics = each(req.Topics, func(t kmsg.FetchRequestTopic) kmsg.FetchResponseTopic {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = t.Topic
			rt.Partitions = each(t.Partitions, func(p kmsg.FetchRequestTopicPartition) kmsg.FetchResponseTopicPartition {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.HighWatermark, rp.RecordBatches = p.Partition, errUnsupportedVersion, -1, []byte{}
				return rp
			})
			return rt
		})
		return resp
	case *kmsg.ListOffsetsRequest:
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		resp.Topics = each(req.Topics, func(t kmsg.ListOffsetsRequestTopic) kmsg.ListOffsetsResponseTopic {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			rt.Partitions = each(t.Partitions, func(p kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errUnsupportedVersion
				return rp
			})
			return rt
		})
		return resp
	}
	return nil
}

// each returns f of every element of in, in order.
func each[In, Out any](in []In, f func(In) Out) []Out {
	out := make([]Out, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}
