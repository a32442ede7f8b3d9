package fsm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/logd-dev/logd/backend"
)

// TestCreateTopicQuota: a creation that would pass the quota it carries is
// refused with a *backend.QuotaError and creates nothing; the quota counts every
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
		var qe *backend.QuotaError
		switch {
		case tc.want == "" && err != nil:
			t.Fatalf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.As(err, &qe) || qe.Resource != tc.want || !errors.Is(err, backend.ErrQuotaExceeded)):
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
	if _, err := decodeCreateTopic(forged[cmdHeaderSize:], commandVersion, nil); !errors.Is(err, backend.ErrBadCommand) {
		t.Fatalf("version 1 with a quota: %v, want backend.ErrBadCommand", err)
	}
}

// TestCreateTopicPrincipalQuota: a creation carrying its principal records
// it on the topic (through a snapshot too), and the per-principal quota
// counts only that principal's topics: refused with a *backend.QuotaError naming
// the principal, creating nothing. Topics without a principal count for
// nobody; an invalid principal is refused without stopping the node.
func TestCreateTopicPrincipalQuota(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	f, fatals := testFSM(t, t.TempDir())
	quota := &TopicQuota{MaxTopics: 100, MaxTopicsPerPrincipal: 2, MaxPartitionsPerPrincipal: 5}
	create := func(name string, parts int32, principal string) []byte {
		t.Helper()
		d, err := EncodeCreateTopic(now, CreateTopic{Name: name, Partitions: parts, Quota: quota, Principal: principal})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for i, tc := range []struct {
		name      string
		cmd       []byte
		refused   string // resource refused, "" for created
		principal string // whose quota refused
		err       error  // another refusal
	}{
		{name: "alice's first", cmd: create("a1", 2, "User:alice")},
		{name: "nobody's", cmd: create("n1", 4, "")},
		{name: "alice's second", cmd: create("a2", 2, "User:alice")},
		{name: "alice's third topic", cmd: create("a3", 1, "User:alice"), refused: "topics", principal: "User:alice"},
		{name: "bob's first", cmd: create("b1", 3, "User:bob")},
		{name: "bob past his partitions", cmd: create("b2", 3, "User:bob"), refused: "partitions", principal: "User:bob"},
		{name: "bob up to his partitions", cmd: create("b2", 2, "User:bob")},
		{name: "a node", cmd: create("x1", 5, "Node:n1")},
		{name: "an invalid principal", cmd: create("x2", 1, "alice"), err: backend.ErrInvalidArgument},
	} {
		res := f.apply(Entry{Index: uint64(i + 1), Command: true, Data: tc.cmd})
		err, _ := res.(error)
		var qe *backend.QuotaError
		switch {
		case tc.err != nil:
			if !errors.Is(err, tc.err) {
				t.Fatalf("%s: got %v, want %v", tc.name, res, tc.err)
			}
		case tc.refused == "" && err != nil:
			t.Fatalf("%s: %v", tc.name, err)
		case tc.refused != "" && (!errors.As(err, &qe) || qe.Resource != tc.refused || qe.Principal != tc.principal || !errors.Is(err, backend.ErrQuotaExceeded)):
			t.Fatalf("%s: got %v, want a quota error of %s on %s", tc.name, err, tc.principal, tc.refused)
		}
	}
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}
	counts := func(f *FSM) string {
		var s []string
		for _, p := range []string{"User:alice", "User:bob", "Node:n1", ""} {
			topics, parts := f.PrincipalTopicCounts(p)
			s = append(s, fmt.Sprintf("%s=%d/%d", p, topics, parts))
		}
		return fmt.Sprint(s)
	}
	want := "[User:alice=2/4 User:bob=2/5 Node:n1=1/5 =1/4]"
	if got := counts(f); got != want {
		t.Fatalf("counts %s, want %s", got, want)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := testFSM(t, t.TempDir())
	if err := f2.Restore(persist(t, snap)); err != nil {
		t.Fatal(err)
	}
	if got := counts(f2); got != want {
		t.Fatalf("counts after a restore %s, want %s", got, want)
	}
	if tp, err := f2.Topic("a1"); err != nil || tp.CreatedBy != "User:alice" {
		t.Fatalf("restored topic %+v, %v", tp, err)
	}
}

// TestCreateTopicPrincipalVersion: a principal or a per-principal quota
// travels only in payload version 3, at SecurityLevel; an older version
// carrying one does not decode.
func TestCreateTopicPrincipalVersion(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	for _, c := range []CreateTopic{
		{Name: "a", Partitions: 1, Principal: "User:a"},
		{Name: "a", Partitions: 1, Quota: &TopicQuota{MaxPartitionsPerPrincipal: 1}},
	} {
		data, err := EncodeCreateTopic(now, c)
		if err != nil {
			t.Fatal(err)
		}
		if level, _, err := EntryLevel(data); err != nil || level != SecurityLevel || data[1] != createTopicPrincipalVersion {
			t.Fatalf("%+v: version %d, level %d, %v; want %d", c, data[1], level, err, SecurityLevel)
		}
		for _, v := range []byte{commandVersion, createTopicQuotaVersion} {
			if _, err := decodeCreateTopic(data[cmdHeaderSize:], v, nil); !errors.Is(err, backend.ErrBadCommand) {
				t.Fatalf("%+v in version %d: %v, want backend.ErrBadCommand", c, v, err)
			}
		}
	}
	if data, err := EncodeCreateTopic(now, CreateTopic{Name: "a", Partitions: 1, Quota: &TopicQuota{MaxTopics: 1}}); err != nil || data[1] != createTopicQuotaVersion {
		t.Fatalf("a cluster quota alone: version %d, %v", data[1], err)
	}
}
