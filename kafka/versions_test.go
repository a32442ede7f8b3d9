package kafka

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestEveryAdvertisedVersion sends each advertised key at each advertised
// version, encoded by kmsg, to a live node, and decodes the answer with
// kmsg at the same version (recv also checks that it re-encodes to the
// bytes sent). The requests build on each other: a topic is created,
// written, read, listed, described, altered and deleted at every version.
func TestEveryAdvertisedVersion(t *testing.T) {
	tn := startNode(t, fastGroups, withSASL(Mechanisms...))
	c := dial(t, tn.addr)
	tn.createTopic("rt", 2, nil)
	tn.setSCRAM("versions", "pw-versions", auth.SCRAMSHA256)

	for _, r := range advertised {
		for v := r.min; v <= r.max; v++ {
			name := fmt.Sprintf("%s/v%d", apiName(r.key), v)
			switch r.key {
			case keyApiVersions:
				req := kmsg.NewPtrApiVersionsRequest()
				req.SetVersion(v)
				req.ClientSoftwareName, req.ClientSoftwareVersion = "logd-test", "1.0"
				resp := c.do(req).(*kmsg.ApiVersionsResponse)
				if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(advertised) {
					t.Errorf("%s: error %d, %d keys", name, resp.ErrorCode, len(resp.ApiKeys))
				}
			case keyMetadata:
				req := kmsg.NewPtrMetadataRequest()
				req.SetVersion(v)
				if v == 0 {
					req.Topics = []kmsg.MetadataRequestTopic{} // all, in version 0
				}
				resp := c.do(req).(*kmsg.MetadataResponse)
				if len(resp.Brokers) != 1 || resp.Brokers[0].Port <= 0 || len(resp.Topics) != 1 || *resp.Topics[0].Topic != "rt" ||
					len(resp.Topics[0].Partitions) != 2 || resp.Topics[0].Partitions[1].Leader != resp.Brokers[0].NodeID {
					t.Errorf("%s: %+v", name, resp)
				}
				if v >= 10 && resp.Topics[0].TopicID == ([16]byte{}) {
					t.Errorf("%s: no topic id", name)
				}
			case keyProduce:
				want := fmt.Sprintf("produce-v%d", v)
				resp := c.do(produceReq(v, -1, "rt", 1, records(t, want)))
				code, base := produceCode(t, resp)
				if code != 0 || base != int64(v-r.min) {
					t.Errorf("%s: code %d, base offset %d; want 0, %d", name, code, base, v-r.min)
				}
			case keyFetch:
				p := fetchPart(t, c.do(fetchReq(v, "rt", 1, 0, 0, 1, 1<<20)))
				got := batchValues(t, p.RecordBatches, 0)
				if p.ErrorCode != 0 || p.HighWatermark != int64(len(got)) || len(got) == 0 || got[0] != "produce-v3" {
					t.Errorf("%s: code %d, high watermark %d, values %q", name, p.ErrorCode, p.HighWatermark, got)
				}
			case keyListOffsets:
				req := kmsg.NewPtrListOffsetsRequest()
				req.SetVersion(v)
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = "rt"
				for _, ts := range []int64{-2, -1} {
					rp := kmsg.NewListOffsetsRequestTopicPartition()
					rp.Partition, rp.Timestamp = 1, ts
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
				resp := c.do(req).(*kmsg.ListOffsetsResponse)
				ps := resp.Topics[0].Partitions
				if ps[0].ErrorCode != 0 || ps[0].Offset != 0 || ps[1].ErrorCode != 0 || ps[1].Offset != 9 {
					t.Errorf("%s: earliest %d (code %d), latest %d (code %d); want 0, 9", name, ps[0].Offset, ps[0].ErrorCode, ps[1].Offset, ps[1].ErrorCode)
				}
			case keyCreateTopics:
				req := kmsg.NewPtrCreateTopicsRequest()
				req.SetVersion(v)
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("created-v%d", v), 3, 1
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("3600000")
				rt.Configs = append(rt.Configs, cfg)
				req.Topics = append(req.Topics, rt)
				resp := c.do(req).(*kmsg.CreateTopicsResponse)
				got := resp.Topics[0]
				if got.ErrorCode != 0 || v >= 5 && (got.NumPartitions != 3 || !slices.ContainsFunc(got.Configs, func(c kmsg.CreateTopicsResponseTopicConfig) bool {
					return c.Name == "retention.ms" && *c.Value == "3600000" && c.Source == int8(kmsg.ConfigSourceDynamicTopicConfig)
				})) {
					t.Errorf("%s: %+v", name, got)
				}
			case keyDeleteTopics:
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.SetVersion(v)
				topic := fmt.Sprintf("created-v%d", v+1) // CreateTopics made 2..7
				if v < 6 {
					req.TopicNames = []string{topic}
				} else {
					rt := kmsg.NewDeleteTopicsRequestTopic()
					rt.Topic = &topic
					req.Topics = append(req.Topics, rt)
				}
				resp := c.do(req).(*kmsg.DeleteTopicsResponse)
				if resp.Topics[0].ErrorCode != 0 {
					t.Errorf("%s: code %d", name, resp.Topics[0].ErrorCode)
				}
				if _, err := tn.backend.Topic(topic); err == nil {
					t.Errorf("%s: %s still exists", name, topic)
				}
			case keyDescribeConfigs:
				req := kmsg.NewPtrDescribeConfigsRequest()
				req.SetVersion(v)
				req.IncludeSynonyms = true
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "rt"
				req.Resources = append(req.Resources, rr)
				resp := c.do(req).(*kmsg.DescribeConfigsResponse)
				got := resp.Resources[0]
				if got.ErrorCode != 0 || !slices.ContainsFunc(got.Configs, func(c kmsg.DescribeConfigsResponseResourceConfig) bool {
					return c.Name == "cleanup.policy" && *c.Value == "delete" && c.Source == kmsg.ConfigSourceDefaultConfig
				}) {
					t.Errorf("%s: %+v", name, got)
				}
			case keyIncrementalAlterConfigs:
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				req.SetVersion(v)
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "rt"
				cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				want := fmt.Sprintf("%d", 1000+v)
				cfg.Name, cfg.Op, cfg.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, &want
				rr.Configs = append(rr.Configs, cfg)
				req.Resources = append(req.Resources, rr)
				resp := c.do(req).(*kmsg.IncrementalAlterConfigsResponse)
				if resp.Resources[0].ErrorCode != 0 {
					t.Errorf("%s: code %d", name, resp.Resources[0].ErrorCode)
				}
				if info, _ := tn.backend.Topic("rt"); info.Config["retention.ms"] != want {
					t.Errorf("%s: retention.ms %q, want %q", name, info.Config["retention.ms"], want)
				}
			case keyCreatePartitions:
				createPartitionsVersionCase(t, tn, c, v, name)
			case keyAlterConfigs:
				req := kmsg.NewPtrAlterConfigsRequest()
				req.SetVersion(v)
				rr := kmsg.NewAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "rt"
				cfg := kmsg.NewAlterConfigsRequestResourceConfig()
				want := fmt.Sprintf("%d", 2000+v)
				cfg.Name, cfg.Value = "retention.ms", &want
				rr.Configs = append(rr.Configs, cfg)
				req.Resources = append(req.Resources, rr)
				resp := c.do(req).(*kmsg.AlterConfigsResponse)
				if resp.Resources[0].ErrorCode != 0 {
					t.Errorf("%s: code %d", name, resp.Resources[0].ErrorCode)
				}
				if info, _ := tn.backend.Topic("rt"); info.Config["retention.ms"] != want {
					t.Errorf("%s: retention.ms %q, want %q", name, info.Config["retention.ms"], want)
				}
			case keyInitProducerID:
				req := kmsg.NewPtrInitProducerIDRequest()
				req.SetVersion(v)
				req.ProducerID, req.ProducerEpoch = -1, -1
				resp := c.do(req).(*kmsg.InitProducerIDResponse)
				if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
					t.Errorf("%s: code %d, producer %d epoch %d", name, resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
				}
			case keySaslHandshake:
				// On a connection of its own: one exchange per connection.
				sc := dial(t, tn.addr)
				req := kmsg.NewPtrSASLHandshakeRequest()
				req.SetVersion(v)
				req.Mechanism = "PLAIN"
				resp := sc.do(req).(*kmsg.SASLHandshakeResponse)
				if resp.ErrorCode != errNone || !slices.Equal(resp.SupportedMechanisms, Mechanisms) {
					t.Errorf("%s: code %d, mechanisms %q; want NONE, %q", name, resp.ErrorCode, resp.SupportedMechanisms, Mechanisms)
				}
			case keySaslAuthenticate:
				sc := dial(t, tn.addr)
				if code := saslHandshake(sc, MechPlain); code != errNone {
					t.Fatalf("%s: handshake: %s", name, errorName(code))
				}
				req := kmsg.NewPtrSASLAuthenticateRequest()
				req.SetVersion(v)
				req.SASLAuthBytes = []byte("\x00versions\x00pw-versions")
				resp := sc.do(req).(*kmsg.SASLAuthenticateResponse)
				if resp.ErrorCode != errNone {
					t.Errorf("%s: code %s", name, errorName(resp.ErrorCode))
				}
			case keyDescribeUserSCRAM:
				req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
				req.SetVersion(v)
				resp := c.do(req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
				if resp.ErrorCode != errNone || len(resp.Results) != 1 || resp.Results[0].User != "versions" ||
					len(resp.Results[0].CredentialInfos) != 1 || resp.Results[0].CredentialInfos[0].Iterations != 4096 {
					t.Errorf("%s: %+v", name, resp)
				}
			case keyAlterUserSCRAM:
				req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				req.SetVersion(v)
				d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
				d.Name, d.Mechanism = "versions", 1
				req.Deletions = append(req.Deletions, d)
				resp := c.do(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
				if len(resp.Results) != 1 || resp.Results[0].ErrorCode != errNone {
					t.Errorf("%s: %+v", name, resp)
				}
				if _, ok := tn.backend.SCRAMCredential("versions", auth.SCRAMSHA256); ok {
					t.Errorf("%s: the credential is still there", name)
				}
			default:
				if !groupVersionCase(t, tn, c, r.key, v, name) && !shareVersionCase(t, tn, c, r.key, v, name) {
					t.Errorf("%s: advertised without a case in this test", name)
				}
			}
		}
	}
}

// TestApiVersionsGolden pins the bytes of the ApiVersions answers, which a
// client reads before it knows anything of the broker: every served
// version, and KIP-511's answer to a version from the future (a version-0
// body with UNSUPPORTED_VERSION and the table; kgo and sarama retry at the
// version it names, librdkafka and kafkajs step down). Run with -update
// after changing the table on purpose.
func TestApiVersionsGolden(t *testing.T) {
	tn := startNode(t)
	c := dial(t, tn.addr)
	for _, v := range []int16{0, 1, 2, 3, 4, 5, 99} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(min(v, 4))
		req.ClientSoftwareName, req.ClientSoftwareVersion = "logd-test", "1.0"
		frame := c.f.AppendRequest(nil, req, int32(100+v))
		if v > 4 {
			// The version field of the header, as a newer client sends it;
			// the body stays version 4's (the server does not read it).
			frame[6], frame[7] = byte(v>>8), byte(v)
		}
		if _, err := c.conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		corr, body, err := c.readFrame(10 * 1e9)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if corr != int32(100+v) {
			t.Fatalf("v%d: correlation id %d", v, corr)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(min(v, 4))
		if v > 4 {
			resp.SetVersion(0)
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: decode: %v", v, err)
		}
		wantCode := int16(0)
		if v > 4 {
			wantCode = errUnsupportedVersion
		}
		if resp.ErrorCode != wantCode || len(resp.ApiKeys) != len(advertised) {
			t.Errorf("v%d: error %d, %d keys; want %d, %d", v, resp.ErrorCode, len(resp.ApiKeys), wantCode, len(advertised))
		}
		golden(t, fmt.Sprintf("apiversions-v%d.hex", v), body)
	}
}

// golden compares got with testdata/golden/name (hex, 32 bytes a line), or
// rewrites the file under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	var sb strings.Builder
	for i := 0; i < len(got); i += 32 {
		sb.WriteString(hex.EncodeToString(got[i:min(i+32, len(got))]))
		sb.WriteByte('\n')
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != sb.String() {
		t.Errorf("%s differs from the golden file:\n got %s\nwant %s", name, sb.String(), want)
	}
}

// TestUnservedRequestsCloseTheConnection: a key or version not advertised
// closes the connection, as Kafka does (clients send only what ApiVersions
// listed), and so does a request larger than the bound or one that does
// not parse; the server keeps serving others.
func TestUnservedRequestsCloseTheConnection(t *testing.T) {
	tn := startNode(t, func(o *Options) { o.Limits.MaxRequestBytes = 1 << 20 })
	cases := map[string]func(c *rawClient){
		"AddPartitionsToTxn": func(c *rawClient) {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.SetVersion(3)
			c.send(req)
		},
		"Produce v12": func(c *rawClient) { c.send(produceReq(12, -1, "t", 0, records(t, "x"))) },
		"OffsetCommit v1": func(c *rawClient) {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.SetVersion(1)
			c.send(req)
		},
		"ConsumerGroupHeartbeat (KIP-848)": func(c *rawClient) {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.SetVersion(0)
			c.send(req)
		},
		"unknown key": func(c *rawClient) {
			c.conn.Write([]byte{0, 0, 0, 10, 0x7f, 0x00, 0, 1, 0, 0, 0, 1, 0xff, 0xff})
		},
		"oversized": func(c *rawClient) { c.conn.Write([]byte{0, 0x20, 0, 0}) },
		"negative size": func(c *rawClient) {
			c.conn.Write([]byte{0xff, 0xff, 0xff, 0xff})
		},
		"truncated body": func(c *rawClient) {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(9)
			frame := c.f.AppendRequest(nil, req, 1)
			frame = append(frame[:len(frame)-2], 0x05) // an array length with no elements
			frame[3] = byte(len(frame) - 4)
			c.conn.Write(frame)
		},
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, tn.addr)
			send(c)
			c.expectClosed()
		})
	}
	// Still serving.
	resp := dial(t, tn.addr).do(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 {
		t.Fatalf("metadata after closed connections: %+v", resp)
	}
}

// TestOldVersionsAnswered: the data path's old versions, which clients
// pinned to Kafka 0.10 send (Produce 0-2, Fetch 0-3, ListOffsets 0), are
// answered at their own version with UNSUPPORTED_VERSION for every
// partition, nothing written, and the connection stays open.
func TestOldVersionsAnswered(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("old", 1, nil)
	c := dial(t, tn.addr)
	for v := int16(0); v < 3; v++ {
		if code, _ := produceCode(t, c.do(produceReq(v, -1, "old", 0, records(t, "x")))); code != errUnsupportedVersion {
			t.Errorf("Produce v%d: %s", v, errorName(code))
		}
	}
	// acks=0 gets no answer, as any produce with acks 0.
	c.send(produceReq(2, 0, "old", 0, records(t, "x")))
	for v := int16(0); v < 4; v++ {
		resp := c.do(fetchReq(v, "old", 0, 0, 0, 1, 1<<20)).(*kmsg.FetchResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != errUnsupportedVersion || len(p.RecordBatches) != 0 {
			t.Errorf("Fetch v%d: %s, %d bytes", v, errorName(p.ErrorCode), len(p.RecordBatches))
		}
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(0)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "old"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.MaxNumOffsets = 0, -1, 1
	rt.Partitions = append(rt.Partitions, rp)
	lo.Topics = append(lo.Topics, rt)
	if p := c.do(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != errUnsupportedVersion {
		t.Errorf("ListOffsets v0: %s", errorName(p.ErrorCode))
	}
	if code, base := produceCode(t, c.do(produceReq(9, -1, "old", 0, records(t, "y")))); code != 0 || base != 0 {
		t.Fatalf("produce v9 after the old versions: %s at %d; nothing old may be written", errorName(code), base)
	}
}
