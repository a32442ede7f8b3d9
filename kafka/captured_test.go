package kafka

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCapturedClientRequests replays requests captured from real clients
// (testdata/captured: each file one request as the client sent it, named
// sequence-connection-key-version) against a node with the same topics,
// each client's connections in order, and checks every answer: the
// correlation id the client sent, a body that decodes at the version it
// asked for (ApiVersions above 4: the KIP-511 answer), and no error code.
//
//   - kcat-1.7.1 (librdkafka 2.0.2, Debian bookworm): kcat -L, kcat -P of
//     three keyed records, kcat -C -o beginning -e.
//   - kgo-1.22.3: a producer of three records with a header, acks=all and
//     its default (idempotent) settings, then a consumer from the start.
//
// The captures were taken through a recording proxy in front of a logd
// built from this package, advertising the proxy's address.
func TestCapturedClientRequests(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "captured", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			tn := startNode(t)
			tn.createTopic("kcat-golden", 1, nil)
			tn.createTopic("kgo-golden", 1, nil)
			files, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
			sort.Strings(files)
			conns := map[string]*rawClient{}
			seen := map[string]bool{}
			for _, path := range files {
				frame, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				connName := strings.Split(filepath.Base(path), "-")[1]
				c := conns[connName]
				if c == nil {
					c = dial(t, tn.addr)
					conns[connName] = c
				}
				h, _, reason := parseRequest(frame)
				if reason != "" {
					t.Fatalf("%s: %s", path, reason)
				}
				seen[apiName(h.key)] = true
				sized := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
				if _, err := c.conn.Write(append(sized, frame...)); err != nil {
					t.Fatal(err)
				}
				corr, body, err := c.readFrame(10 * time.Second)
				if err != nil {
					t.Fatalf("%s: %v", filepath.Base(path), err)
				}
				if corr != h.correlationID {
					t.Fatalf("%s: correlation id %d, sent %d", filepath.Base(path), corr, h.correlationID)
				}
				checkCaptured(t, filepath.Base(path), h, body)
			}
			for _, api := range []string{"ApiVersions", "Metadata", "Produce", "ListOffsets", "Fetch"} {
				if !seen[api] {
					t.Errorf("no %s request in the capture", api)
				}
			}
		})
	}
}

// checkCaptured decodes the answer to a captured request and checks it
// carries no error.
func checkCaptured(t *testing.T, name string, h requestHeader, body []byte) {
	t.Helper()
	resp := kmsg.ResponseForKey(h.key)
	resp.SetVersion(h.version)
	if h.key == keyApiVersions && !served(h.key, h.version) {
		resp.SetVersion(0)
	} else if resp.IsFlexible() && h.key != keyApiVersions {
		body = body[1:] // the header's empty tags
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("%s: decode the answer: %v", name, err)
	}
	var codes []int16
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		if served(h.key, h.version) && r.ErrorCode != 0 || !served(h.key, h.version) && r.ErrorCode != errUnsupportedVersion {
			t.Errorf("%s: ApiVersions error %d", name, r.ErrorCode)
		}
		if len(r.ApiKeys) != len(advertised) {
			t.Errorf("%s: %d keys", name, len(r.ApiKeys))
		}
	case *kmsg.MetadataResponse:
		for _, tp := range r.Topics {
			codes = append(codes, tp.ErrorCode)
		}
		if len(r.Brokers) != 1 {
			t.Errorf("%s: %d brokers", name, len(r.Brokers))
		}
	case *kmsg.ProduceResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		codes = append(codes, r.ErrorCode)
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	default:
		t.Errorf("%s: unexpected %s", name, apiName(h.key))
	}
	for _, c := range codes {
		if c != 0 {
			t.Errorf("%s: error %s", name, errorName(c))
		}
	}
}
