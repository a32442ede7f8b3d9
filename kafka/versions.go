package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the versions of one key this front end serves, all of
// which are tested (versions_test.go round-trips each through kmsg).
type versionRange struct {
	key      int16
	min, max int16
}

// advertised is the ApiVersions table, sorted by key. Minimums are low
// because kafkajs picks min(its max, the broker's max) without looking at
// the broker's minimum; maximums stop where a version needs what logd does
// not have (Produce 12 is KIP-890 transactions and 13 topic ids, Fetch 13
// topic ids). librdkafka enables RecordBatch v2 only when Produce 3 and
// Fetch 4 are in range, and zstd when Produce 7 and Fetch 10 are.
// InitProducerId is listed only once the cluster serves idempotent
// producers, AlterShareGroupOffsets and DeleteShareGroupOffsets only once
// it moves and deletes queue groups (apiKeys); every transaction API is left out, and clients
// refuse transactions themselves. The
// group APIs are the classic protocol's (KIP-848's ConsumerGroupHeartbeat
// is left out, so clients use the classic one). SaslHandshake version 0
// is followed by raw SASL frames, served too (auth_sasl.go).
var advertised = []versionRange{
	{keyProduce, 3, 11},
	{keyFetch, 4, 12},
	{keyListOffsets, 1, 7},
	{keyMetadata, 0, 12},
	{keyOffsetCommit, 2, 9},
	{keyOffsetFetch, 1, 9},
	{keyFindCoordinator, 0, 4},
	{keyJoinGroup, 0, 9},
	{keyHeartbeat, 0, 4},
	{keyLeaveGroup, 0, 5},
	{keySyncGroup, 0, 5},
	{keyDescribeGroups, 0, 5},
	{keyListGroups, 0, 5},
	{keySaslHandshake, 0, 1},
	{keyApiVersions, 0, 4},
	{keyCreateTopics, 2, 7},
	{keyDeleteTopics, 1, 6},
	{keyInitProducerID, 0, 5},
	{keyDescribeConfigs, 1, 4},
	{keyAlterConfigs, 0, 2},
	{keySaslAuthenticate, 0, 2},
	{keyCreatePartitions, 0, 3},
	{keyDeleteGroups, 0, 2},
	{keyIncrementalAlterConfigs, 0, 1},
	{keyOffsetDelete, 0, 0},
	{keyDescribeUserSCRAM, 0, 0},
	{keyAlterUserSCRAM, 0, 0},
	{keyShareGroupHeartbeat, 1, 1},
	{keyShareGroupDescribe, 1, 1},
	{keyShareFetch, 1, 2},
	{keyShareAcknowledge, 1, 2},
	{keyDescribeShareGroupOffsets, 0, 1},
	{keyAlterShareGroupOffsets, 0, 0},
	{keyDeleteShareGroupOffsets, 0, 0},
}

// served reports whether key at version is in the advertised table.
func served(key, version int16) bool {
	i, ok := slices.BinarySearchFunc(advertised, key, func(r versionRange, k int16) int { return int(r.key) - int(k) })
	return ok && version >= advertised[i].min && version <= advertised[i].max
}

// apiVersions answers an ApiVersions request. A version above the highest
// served gets the KIP-511 answer: a version-0 body with UNSUPPORTED_VERSION
// and the whole table, from which the client picks a version it shares
// and asks again.
func (s *Server) apiVersions(h requestHeader, body []byte) kmsg.Response {
	max := advertised[slices.IndexFunc(advertised, func(r versionRange) bool { return r.key == keyApiVersions })].max
	resp := kmsg.NewPtrApiVersionsResponse()
	if h.version > max || h.version < 0 {
		resp.SetVersion(0)
		resp.ErrorCode = errUnsupportedVersion
		resp.ApiKeys = s.apiKeys()
		return resp
	}
	resp.SetVersion(h.version)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(h.version)
	if err := req.ReadFrom(body); err != nil {
		resp.ErrorCode = errInvalidRequest
		return resp
	}
	resp.ApiKeys = s.apiKeys()
	return resp
}

// apiKeys is the advertised table as ApiVersions lists it: InitProducerId
// only once every member's build judges idempotent batches (the
// backend's CheckIdempotence), since kgo and librdkafka produce with a
// producer id as soon as it is listed; AlterShareGroupOffsets and
// DeleteShareGroupOffsets only once every member's build applies their
// commands (CheckQueueStarts).
func (s *Server) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	idempotent := s.b.CheckIdempotence() == nil
	queueStarts := s.b.CheckQueueStarts() == nil
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(advertised))
	for _, r := range advertised {
		if r.key == keyInitProducerID && !idempotent {
			continue
		}
		if (r.key == keyAlterShareGroupOffsets || r.key == keyDeleteShareGroupOffsets) && !queueStarts {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = r.key, r.min, r.max
		keys = append(keys, k)
	}
	return keys
}
