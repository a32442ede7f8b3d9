package kafka

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/replicationtest"
)

// groupConfigOp is one change of a GROUP resource: SET with a value, or
// DELETE without one.
type groupConfigOp struct {
	name  string
	value *string
}

func setOp(name, value string) groupConfigOp { return groupConfigOp{name: name, value: &value} }
func deleteOp(name string) groupConfigOp     { return groupConfigOp{name: name} }

// alterGroupConfig sends IncrementalAlterConfigs of one GROUP resource and
// returns its code and message.
func (c *rawClient) alterGroupConfig(groupID string, validateOnly bool, ops ...groupConfigOp) (int16, string) {
	c.t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(1)
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
	for _, op := range ops {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value, cfg.Op = op.name, op.value, kmsg.IncrementalAlterConfigOpSet
		if op.value == nil {
			cfg.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		rr.Configs = append(rr.Configs, cfg)
	}
	req.Resources = append(req.Resources, rr)
	r := c.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return r.ErrorCode, msg
}

// describedSetting is a setting as DescribeConfigs shows it.
type describedSetting struct {
	value  string
	source kmsg.ConfigSource
}

// describeGroupConfig sends DescribeConfigs of one GROUP resource and
// returns its code and settings.
func (c *rawClient) describeGroupConfig(groupID string) (int16, map[string]describedSetting) {
	c.t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
	req.Resources = append(req.Resources, rr)
	r := c.do(req).(*kmsg.DescribeConfigsResponse).Resources[0]
	out := map[string]describedSetting{}
	for _, cfg := range r.Configs {
		out[cfg.Name] = describedSetting{value: *cfg.Value, source: cfg.Source}
	}
	return r.ErrorCode, out
}

// configFollower is a follower that hands share calls to its leader and
// changes no share group's settings itself, as a follower's backend
// refuses to propose.
type configFollower struct{ callsFollower }

func (configFollower) AlterShareGroupConfig(context.Context, backend.AlterShareGroupConfig) (backend.ShareGroupConfig, error) {
	return backend.ShareGroupConfig{}, backend.ErrNotLeader
}

// TestShareConfigsThroughFollower: share-group settings set through a node
// that does not lead are made by the leader, with the client's principal:
// the leader's ACLs refuse it first (GROUP_AUTHORIZATION_FAILED, the
// leader's audit line naming the node it came through), then, once they
// allow it, the change is made and every node's DescribeConfigs shows
// it; a bad value is INVALID_CONFIG and changes nothing. A coordinator
// that starts afterwards, with nothing in its memory (the leadership
// moved, or the leader restarted), creates the group's queue group by
// the settings: a share consumer then gets the records written before it
// joined, under the lock set.
func TestShareConfigsThroughFollower(t *testing.T) {
	lb := &callsLeader{}
	leaderAudit, followerAudit := &syncBuffer{}, &syncBuffer{}
	tn := startNode(t, withShare(time.Minute, time.Hour, 10), func(o *Options) {
		acls := o.Backend.(interface{ ACLs() *auth.Set })
		o.Auth.Authorizer = auth.NewAuthorizer(true, nil, acls.ACLs)
		o.Auth.Audit = slog.New(slog.NewJSONHandler(leaderAudit, nil))
		lb.Kafka = o.Backend
		o.Backend = lb
	})
	ff := startNode(t, withShare(time.Minute, time.Hour, 10), func(o *Options) {
		o.Backend = configFollower{callsFollower{follower: follower{tn.backend}, l: lb, id: "n2"}}
		o.Auth.Audit = slog.New(slog.NewJSONHandler(followerAudit, nil))
	})
	tn.createTopic("cfg", 1, nil)
	viaFollower := dial(t, ff.addr)
	earliest := []groupConfigOp{
		setOp(backend.ShareAutoOffsetReset, "earliest"),
		setOp(backend.ShareDeliveryCountLimit, "3"),
		setOp(backend.ShareRecordLockDurationMs, "60000"),
	}

	// The follower lets anyone change anything; the leader's ACLs do not.
	if code, _ := viaFollower.alterGroupConfig("g", false, earliest...); code != errGroupAuthorizationFailed {
		t.Fatalf("through the follower, refused by the leader's ACLs: %s", errorName(code))
	}
	if got := tn.backend.ShareGroupConfig("g"); got != (backend.ShareGroupConfig{}) {
		t.Fatalf("a refused change made %+v", got)
	}
	for _, want := range []string{`"principal":"User:ANONYMOUS"`, `"outcome":"group_authorization_failed"`, `"forwarded_by":"n2"`} {
		if !strings.Contains(leaderAudit.String(), want) {
			t.Errorf("the leader's audit log lacks %s:\n%s", want, leaderAudit)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := tn.backend.CreateACLs(ctx, []auth.ACL{{Principal: auth.Anonymous.String(), Resource: auth.ResourceGroup, Pattern: auth.PatternLiteral,
		Name: "g", Operation: auth.OpAlter, Effect: auth.Allow}}); err != nil {
		t.Fatal(err)
	}
	if code, msg := viaFollower.alterGroupConfig("g", false, earliest...); code != errNone {
		t.Fatalf("through the follower, allowed: %s %s", errorName(code), msg)
	}
	want := backend.ShareGroupConfig{AutoOffsetReset: "earliest", DeliveryCountLimit: 3, RecordLockDuration: time.Minute}
	if got := tn.backend.ShareGroupConfig("g"); got != want {
		t.Fatalf("settings %+v, want %+v", got, want)
	}
	for name, log := range map[string]*syncBuffer{"leader": leaderAudit, "follower": followerAudit} {
		if !strings.Contains(log.String(), `"outcome":"ok"`) {
			t.Errorf("the %s's audit log has no line of the change:\n%s", name, log)
		}
	}
	for _, bad := range [][]groupConfigOp{
		{setOp(backend.ShareDeliveryCountLimit, "0")},
		{setOp(backend.ShareAutoOffsetReset, "by_duration:PT1H")},
		{setOp(backend.ShareDeliveryCountLimit, "4"), setOp("share.isolation.level", "read_committed")},
	} {
		if code, msg := viaFollower.alterGroupConfig("g", false, bad...); code != errInvalidConfig || msg == "" {
			t.Errorf("%v through the follower: %s %q, want INVALID_CONFIG with a message", bad, errorName(code), msg)
		}
	}
	if got := tn.backend.ShareGroupConfig("g"); got != want {
		t.Fatalf("settings after refused changes %+v, want %+v", got, want)
	}
	if code, described := viaFollower.describeGroupConfig("g"); code != errNone ||
		described[backend.ShareAutoOffsetReset] != (describedSetting{"earliest", kmsg.ConfigSourceGroupConfig}) ||
		described[backend.ShareDeliveryCountLimit] != (describedSetting{"3", kmsg.ConfigSourceGroupConfig}) ||
		described[backend.ShareRecordLockDurationMs] != (describedSetting{"60000", kmsg.ConfigSourceGroupConfig}) {
		t.Fatalf("described through the follower: %s %+v", errorName(code), described)
	}

	// A coordinator with nothing in its memory, as after the leadership
	// moved.
	fresh, stop := kafkaOn(t, tn.backend)
	defer stop()
	c := dial(t, fresh)
	if code, _ := produceCode(t, c.do(produceReq(9, -1, "cfg", 0, records(t, "a", "b", "c", "d", "e")))); code != errNone {
		t.Fatalf("produce: %s", errorName(code))
	}
	c.join("g", "m", "cfg")
	r := c.shareFetch(1, tn, "g", "m", 0, "cfg", true, 2*time.Second)
	// The answer's lock is what is left of the records' lease.
	if got := acquired(r)[0]; r.ErrorCode != 0 || len(got) != 5 || r.AcquisitionLockTimeoutMillis > 60_000 || r.AcquisitionLockTimeoutMillis < 50_000 {
		t.Fatalf("the new coordinator's first fetch: code %s, lock %d ms, acquired %v; want the 5 records written before, under a lock of 60000 ms (what is left of it)",
			errorName(r.ErrorCode), r.AcquisitionLockTimeoutMillis, got)
	}
	if info, err := tn.backend.DescribeQueueGroup("cfg", "g", time.Now().UnixNano()); err != nil || info.Config.MaxDeliveries != 3 {
		t.Fatalf("the queue group: %+v, %v; want max deliveries 3", info.Config, err)
	}

	// A setting deleted through the follower is its default again.
	if code, msg := viaFollower.alterGroupConfig("g", false, deleteOp(backend.ShareRecordLockDurationMs)); code != errNone {
		t.Fatalf("delete the lock through the follower: %s %s", errorName(code), msg)
	}
	if _, described := viaFollower.describeGroupConfig("g"); described[backend.ShareRecordLockDurationMs] != (describedSetting{"3600000", kmsg.ConfigSourceDefaultConfig}) {
		t.Fatalf("the lock after its delete: %+v", described[backend.ShareRecordLockDurationMs])
	}
}

// TestShareConfigsRestart: share-group settings survive the restart of
// the node (from its snapshot, and from the Raft log after it): the
// restarted node's coordinator creates the group's queue group from the
// earliest offset, with the delivery limit set after the snapshot.
func TestShareConfigsRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *replicationtest.Node {
		n, err := replicationtest.Open(replicationtest.Options{Dir: dir, TCP: true, APIAdvertise: "127.0.0.1:7070",
			Fatal: func(err error) { t.Errorf("node stopped: %v", err) }})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := n.Backend.CreateTopic(ctx, backend.CreateTopic{Name: "r", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	addr, stop := kafkaOn(t, n.Backend)
	c := dial(t, addr)
	if code, msg := c.alterGroupConfig("g", false, setOp(backend.ShareAutoOffsetReset, "earliest")); code != errNone {
		t.Fatalf("set earliest: %s %s", errorName(code), msg)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if code, msg := c.alterGroupConfig("g", false, setOp(backend.ShareDeliveryCountLimit, "2")); code != errNone {
		t.Fatalf("set the limit: %s %s", errorName(code), msg)
	}
	if code, _ := produceCode(t, c.do(produceReq(9, -1, "r", 0, records(t, "a", "b", "c")))); code != errNone {
		t.Fatalf("produce: %s", errorName(code))
	}
	stop()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = open()
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	addr, stop = kafkaOn(t, n.Backend)
	defer stop()
	c = dial(t, addr)
	if _, described := c.describeGroupConfig("g"); described[backend.ShareAutoOffsetReset].value != "earliest" || described[backend.ShareDeliveryCountLimit].value != "2" {
		t.Fatalf("described after the restart: %+v", described)
	}
	tn := &testNode{t: t, backend: n.Backend}
	c.join("g", "m", "r")
	if got := acquired(c.shareFetch(1, tn, "g", "m", 0, "r", true, 2*time.Second))[0]; len(got) != 3 {
		t.Fatalf("after the restart the first fetch acquired %v; want the 3 records written before", got)
	}
	if info, err := n.Backend.DescribeQueueGroup("r", "g", time.Now().UnixNano()); err != nil || info.Config.MaxDeliveries != 2 {
		t.Fatalf("the queue group: %+v, %v; want max deliveries 2", info.Config, err)
	}
}

// TestShareConfigsBelowLevel: while a member's build does not apply the
// settings' command, a change is refused (POLICY_VIOLATION, naming the
// level; validating too) and nothing is set: DescribeConfigs shows the
// defaults, and a heartbeat creates the queue group at the end.
func TestShareConfigsBelowLevel(t *testing.T) {
	tn := startNodeWith(t, replicationtest.Options{FeatureLevel: backend.FeatureLevel(fsm.MovesLevel)})
	tn.createTopic("old", 1, nil)
	c := dial(t, tn.addr)
	for _, validateOnly := range []bool{true, false} {
		code, msg := c.alterGroupConfig("g", validateOnly, setOp(backend.ShareAutoOffsetReset, "earliest"))
		if code != errPolicyViolation || !strings.Contains(msg, "feature level 19") {
			t.Fatalf("validate only %v: %s %q, want POLICY_VIOLATION naming level 19", validateOnly, errorName(code), msg)
		}
	}
	if _, described := c.describeGroupConfig("g"); described[backend.ShareAutoOffsetReset] != (describedSetting{"latest", kmsg.ConfigSourceDefaultConfig}) {
		t.Fatalf("described: %+v", described)
	}
	if code, _ := produceCode(t, c.do(produceReq(9, -1, "old", 0, records(t, "a", "b")))); code != errNone {
		t.Fatalf("produce: %s", errorName(code))
	}
	c.join("g", "m", "old")
	if start := queueStart(t, tn, "old", "g", 0); start != 2 {
		t.Fatalf("the queue group starts at %d, want the end (2)", start)
	}
}
