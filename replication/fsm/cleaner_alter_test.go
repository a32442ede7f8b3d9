package fsm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
)

// TestAlterTopicApply: an alter sets and resets settings, and a refused one
// changes nothing.
func TestAlterTopicApply(t *testing.T) {
	now := int64(1_700_000_000_000) * int64(time.Millisecond)
	for _, tc := range []struct {
		name    string
		alter   AlterTopic
		wantErr error
		want    map[string]string // settings after the alter (checked keys only)
	}{
		{name: "set", alter: AlterTopic{Config: map[string]string{ConfigRetentionMs: "5"}},
			want: map[string]string{ConfigRetentionMs: "5", ConfigSegmentBytes: "1000"}},
		{name: "delete returns the default", alter: AlterTopic{Delete: []string{ConfigSegmentBytes}},
			want: map[string]string{ConfigRetentionMs: "100", ConfigSegmentBytes: "1073741824"}},
		{name: "set and delete", alter: AlterTopic{Config: map[string]string{ConfigCleanupPolicy: "compact"}, Delete: []string{ConfigRetentionMs}},
			want: map[string]string{ConfigRetentionMs: "604800000", ConfigCleanupPolicy: "compact"}},
		{name: "largest segment", alter: AlterTopic{Config: map[string]string{ConfigSegmentBytes: "4294967295"}},
			want: map[string]string{ConfigSegmentBytes: "4294967295"}},
		{name: "nothing", alter: AlterTopic{}, wantErr: backend.ErrInvalidArgument},
		{name: "unknown key", alter: AlterTopic{Config: map[string]string{"bogus": "1"}}, wantErr: backend.ErrInvalidConfig},
		{name: "delete unknown key", alter: AlterTopic{Delete: []string{"bogus"}}, wantErr: backend.ErrInvalidConfig},
		{name: "set and delete one key", alter: AlterTopic{Config: map[string]string{ConfigRetentionMs: "5"}, Delete: []string{ConfigRetentionMs}}, wantErr: backend.ErrInvalidConfig},
		{name: "bad value", alter: AlterTopic{Config: map[string]string{ConfigRetentionMs: "soon"}}, wantErr: backend.ErrInvalidConfig},
		{name: "segment over 4 GiB-1", alter: AlterTopic{Config: map[string]string{ConfigSegmentBytes: "4294967296"}}, wantErr: backend.ErrInvalidConfig},
		{name: "unknown topic", alter: AlterTopic{Name: "nope", Config: map[string]string{ConfigRetentionMs: "5"}}, wantErr: backend.ErrUnknownTopic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fatals := testFSM(t, t.TempDir())
			f.ApplyBatch(entries(mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "a", Partitions: 1,
				Config: map[string]string{ConfigRetentionMs: "100", ConfigSegmentBytes: "1000"}})))
			before, _ := f.Topic("a")
			if tc.alter.Name == "" {
				tc.alter.Name = "a"
			}
			res := f.apply(Entry{Index: 2, Command: true, Data: mustJSON(t, CmdAlterTopic, now, tc.alter)})
			after, _ := f.Topic("a")
			if tc.wantErr != nil {
				if err, _ := res.(error); !errors.Is(err, tc.wantErr) {
					t.Fatalf("result %v, want %v", res, tc.wantErr)
				}
				if fmt.Sprint(after.Config) != fmt.Sprint(before.Config) {
					t.Fatalf("refused alter changed the config: %v -> %v", before.Config, after.Config)
				}
				return
			}
			if _, ok := res.(*Topic); !ok {
				t.Fatalf("result %#v", res)
			}
			for k, v := range tc.want {
				if after.Config[k] != v {
					t.Errorf("%s = %q, want %q", k, after.Config[k], v)
				}
			}
			seg, _ := after.Partitions[0].Log().RollPolicy()
			if want := configInt(after.Config, ConfigSegmentBytes); seg != want {
				t.Errorf("log rolls at %d bytes, want %d", seg, want)
			}
			if len(*fatals) > 0 {
				t.Fatal(*fatals)
			}
		})
	}
}

// TestCreateTopicSegmentBytesLimit: a segment.bytes the log cannot hold is
// refused by the config check, not left for the log to refuse inside Apply
// (which would stop the node).
func TestCreateTopicSegmentBytesLimit(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	res := f.ApplyBatch(entries(mustJSON(t, CmdCreateTopic, 1, CreateTopic{Name: "big", Partitions: 1,
		Config: map[string]string{ConfigSegmentBytes: "5000000000"}})))
	if err, _ := res[0].(error); !errors.Is(err, backend.ErrInvalidConfig) {
		t.Fatalf("result %v, want backend.ErrInvalidConfig", res[0])
	}
	if len(*fatals) > 0 {
		t.Fatalf("node stopped: %v", *fatals)
	}
}
