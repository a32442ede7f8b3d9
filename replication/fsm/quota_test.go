package fsm

import (
	"errors"
	"testing"
)

// TestCreateTopicQuota: a creation that would pass the quota it carries is
// refused with a *QuotaError and creates nothing; the quota counts every
// topic and partition the state machine holds, whoever created them.
func TestCreateTopicQuota(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	f, fatals := testFSM(t, t.TempDir())
	quota := &TopicQuota{MaxTopics: 3, MaxPartitions: 6}
	create := func(name string, parts int32, q *TopicQuota) []byte {
		t.Helper()
		d, err := EncodeCreateTopic(now, CreateTopic{Name: name, Partitions: parts, Quota: q})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for i, tc := range []struct {
		name string
		cmd  []byte
		want string // resource refused, "" for created
	}{
		{name: "no quota", cmd: create("a", 2, nil)},
		{name: "within", cmd: create("b", 2, quota)},
		{name: "past the partitions", cmd: create("c", 3, quota), want: "partitions"},
		{name: "up to the partitions", cmd: create("c", 2, quota)},
		{name: "past the topics", cmd: create("d", 1, &TopicQuota{MaxTopics: 3}), want: "topics"},
		{name: "a larger quota", cmd: create("d", 1, &TopicQuota{MaxTopics: 4})},
	} {
		res := f.apply(Entry{Index: uint64(i + 1), Command: true, Data: tc.cmd})
		err, _ := res.(error)
		var qe *QuotaError
		switch {
		case tc.want == "" && err != nil:
			t.Fatalf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.As(err, &qe) || qe.Resource != tc.want || !errors.Is(err, ErrQuotaExceeded)):
			t.Fatalf("%s: got %v, want a quota error on %s", tc.name, err, tc.want)
		}
	}
	if topics, parts := f.TopicCounts(); topics != 4 || parts != 7 {
		t.Fatalf("counts %d topics, %d partitions; want 4, 7", topics, parts)
	}
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}
}

// TestCreateTopicQuotaVersion: a quota travels only in its own payload
// version, at QuotaLevel, so a build that predates quotas refuses the
// entry instead of creating what the others refuse; version 1 with a
// quota does not decode.
func TestCreateTopicQuotaVersion(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	plain, err := EncodeCreateTopic(now, CreateTopic{Name: "a", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	withQuota, err := EncodeCreateTopic(now, CreateTopic{Name: "a", Partitions: 1, Quota: &TopicQuota{MaxTopics: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if level, _, err := EntryLevel(plain); err != nil || level != BaseLevel {
		t.Fatalf("without a quota: level %d, %v; want %d", level, err, BaseLevel)
	}
	if level, _, err := EntryLevel(withQuota); err != nil || level != QuotaLevel {
		t.Fatalf("with a quota: level %d, %v; want %d", level, err, QuotaLevel)
	}
	forged := append([]byte(nil), withQuota...)
	forged[1] = commandVersion
	if _, err := decodeCreateTopic(forged[cmdHeaderSize:], commandVersion, nil); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("version 1 with a quota: %v, want ErrBadCommand", err)
	}
}
