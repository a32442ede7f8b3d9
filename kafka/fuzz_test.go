package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// FuzzRequest feeds arbitrary frames (without the size prefix) to the
// request decoding a connection does, and the batches of a produce to the
// batch checks: nothing may panic, and a request that decodes encodes back
// to a request that decodes again.
func FuzzRequest(f *testing.F) {
	rf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	seed := func(req kmsg.Request) { f.Add(rf.AppendRequest(nil, req, 7)[4:]) }
	for _, r := range advertised {
		for _, v := range []int16{r.min, r.max} {
			req := kmsg.RequestForKey(r.key)
			req.SetVersion(v)
			seed(req)
		}
	}
	seed(produceReq(9, -1, "t", 0, records(f, "a", "b")))
	seed(produceReq(3, 1, "t", 0, withAttributes(records(f, "c"), 2, -1)))
	seed(fetchReq(12, "t", 0, 5, 100, 1, 1000))
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, reason := parseRequest(frame)
		if reason != "" || h.key == keyApiVersions {
			return
		}
		req, err := decodeRequest(h, body)
		if err != nil {
			return
		}
		if p, ok := req.(*kmsg.ProduceRequest); ok {
			for _, t := range p.Topics {
				for _, part := range t.Partitions {
					checkBatch(part.Records, fuzzFeatures{}, true)
					checkBatch(part.Records, fuzzFeatures{refuse: true}, false)
				}
			}
		}
		again := kmsg.RequestForKey(h.key)
		again.SetVersion(h.version)
		if err := again.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatalf("%s v%d decoded, but its encoding does not: %v", apiName(h.key), h.version, err)
		}
	})
}

// fuzzFeatures allows every codec and producer ids, or refuses them all.
type fuzzFeatures struct{ refuse bool }

func (f fuzzFeatures) CheckCompression(c batch.Compression) error {
	if f.refuse {
		return &batch.UnsupportedCompressionError{Codec: c}
	}
	return nil
}

func (f fuzzFeatures) CheckIdempotence() error {
	if f.refuse {
		return backend.ErrFeatureLevel
	}
	return nil
}
