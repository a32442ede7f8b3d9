package catchup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// fileSource serves segments straight from peer FSMs in this process.
type fileSource struct {
	peers map[string]*fsm.FSM // by API address
	fail  map[string]bool     // addresses that fail every call
	calls int
}

func (s *fileSource) files(addr string, ref SegmentRef) (string, string, error) {
	s.calls++
	if s.fail[addr] {
		return "", "", fmt.Errorf("peer %s is down", addr)
	}
	return s.peers[addr].SegmentFiles(ref.Topic, ref.TopicIndex, ref.Partition, ref.Base)
}

func (s *fileSource) SegmentMeta(ctx context.Context, addr string, ref SegmentRef) ([]byte, error) {
	_, meta, err := s.files(addr, ref)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(meta)
}

func (s *fileSource) SegmentData(ctx context.Context, addr string, ref SegmentRef) (io.ReadCloser, error) {
	data, _, err := s.files(addr, ref)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(data)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, ref.Bytes), f}, nil
}

// segmentSums returns name -> sha256 of every .log and .meta file under
// root.
func segmentSums(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".log") || strings.HasSuffix(p, ".meta") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[rel] = sha256.Sum256(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedKeys(m map[string][32]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestRestoreFetchesMissingSegments(t *testing.T) {
	// The leader's history: a topic with small segments, 40 appends.
	var cmds [][]byte
	c := fsmtest.Command(t, fsm.CmdCreateTopic, 1, fsm.CreateTopic{Name: "t", Partitions: 2, Config: map[string]string{"segment.bytes": "400"}})
	cmds = append(cmds, c, fsmtest.Command(t, fsm.CmdNodeRegister, 2, fsm.NodeRegister{ID: "a", APIAddress: "a:1"}),
		fsmtest.Command(t, fsm.CmdNodeRegister, 2, fsm.NodeRegister{ID: "down", APIAddress: "down:1"}))
	for i := range 40 {
		cmds = append(cmds, fsm.EncodeAppend(int64(10+i), fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: int32(i % 2), Batch: mustBatch(t, fmt.Sprintf("v%d", i))}}}))
	}
	log := fsmtest.Entries(cmds...)
	leaderDir := t.TempDir()
	leader, _ := fsmtest.New(t, leaderDir, nil)
	leader.ApplyBatch(log)
	snap := fsmtest.Snapshot(t, leader)

	for _, tc := range []struct {
		name    string
		applied int // entries the follower applied before it fell behind
	}{
		{name: "empty follower", applied: 0},
		{name: "follower holds a prefix", applied: 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := &fileSource{peers: map[string]*fsm.FSM{"a:1": leader}, fail: map[string]bool{"down:1": true}}
			f, fatals := fsmtest.New(t, dir, NewSegmentFetcher(src, FetcherOptions{Logger: fsmtest.Logger()}))
			if tc.applied > 0 {
				f.ApplyBatch(log[:tc.applied])
			}
			if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
				t.Fatal(err)
			}
			if len(*fatals) > 0 {
				t.Fatal(*fatals)
			}
			for p := int32(0); p < 2; p++ {
				if got, want := fsmtest.ReadAll(t, f, "t", p), fsmtest.ReadAll(t, leader, "t", p); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("partition %d: %v, want %v", p, got, want)
				}
			}
			want, got := segmentSums(t, filepath.Join(leaderDir, "topics")), segmentSums(t, filepath.Join(dir, "topics"))
			if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(sortedKeys(want)) {
				t.Fatalf("files %v, want %v", sortedKeys(got), sortedKeys(want))
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s differs from the leader's", k)
				}
			}
			// Replaying the rest of the log is idempotent on the installed data.
			more := fsmtest.Entries(append(cmds, fsm.EncodeAppend(99, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "after")}}}))...)
			f.ApplyBatch(more[len(cmds):])
			if got := fsmtest.ReadAll(t, f, "t", 0); got[len(got)-1] != "after" || len(got) != 21 {
				t.Fatalf("after install, appends go on: %v", got)
			}
		})
	}
}

func TestRestoreWithoutPeersRefuses(t *testing.T) {
	leader, _ := fsmtest.New(t, t.TempDir(), nil)
	leader.ApplyBatch(fsmtest.Entries(fsmtest.Command(t, fsm.CmdCreateTopic, 1, fsm.CreateTopic{Name: "t", Partitions: 1}), fsm.EncodeAppend(2, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "x")}}})))
	snap := fsmtest.Snapshot(t, leader)
	f, _ := fsmtest.New(t, t.TempDir(), NewSegmentFetcher(&fileSource{}, FetcherOptions{Logger: fsmtest.Logger()}))
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err == nil || !strings.Contains(err.Error(), backend.ErrNoSegmentSource.Error()) {
		t.Fatalf("got %v", err)
	}
}
