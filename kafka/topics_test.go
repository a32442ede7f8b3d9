package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateTopicsRefusals: each refusal of CreateTopics has its code, and
// a validate-only request creates nothing.
func TestCreateTopicsRefusals(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("exists", 1, nil)
	c := dial(t, tn.addr)
	topic := func(name string, parts int32, rf int16, cfg map[string]string) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, rf
		for k, v := range cfg {
			rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
		}
		return rt
	}
	assigned := topic("assigned", -1, -1, nil)
	assigned.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}
	cases := []struct {
		topic kmsg.CreateTopicsRequestTopic
		code  int16
	}{
		{topic("exists", 1, 1, nil), errTopicAlreadyExists},
		{topic("bad name", 1, 1, nil), errInvalidTopic},
		{topic("zero", 0, 1, nil), errInvalidPartitions},
		{topic("many", 20000, 1, nil), errInvalidPartitions},
		{topic("rf", 1, 0, nil), errInvalidReplicationFactor},
		{topic("rf3", 1, 3, nil), errInvalidReplicationFactor}, // one voter
		{assigned, errInvalidReplicaAssignment},
		{topic("cfg", 1, 1, map[string]string{"no.such.setting": "1"}), errInvalidConfig},
		{topic("cfg2", 1, 1, map[string]string{"retention.ms": "soon"}), errInvalidConfig},
		{topic("dup", 1, 1, nil), errInvalidRequest},
		{topic("dup", 1, 1, nil), errInvalidRequest},
		{topic("defaults", -1, -1, nil), errNone},
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	for _, tc := range cases {
		req.Topics = append(req.Topics, tc.topic)
	}
	resp := c.do(req).(*kmsg.CreateTopicsResponse)
	for i, tc := range cases {
		got := resp.Topics[i]
		if got.Topic != tc.topic.Topic || got.ErrorCode != tc.code {
			t.Errorf("%s: code %s (%v); want %s", tc.topic.Topic, errorName(got.ErrorCode), got.ErrorMessage, errorName(tc.code))
		}
		// Messages speak to Kafka users: no Go package names.
		if m := got.ErrorMessage; m != nil && packagePrefix.MatchString(*m) {
			t.Errorf("%s: message %q names a Go package", tc.topic.Topic, *m)
		}
	}
	if info, err := tn.backend.Topic("defaults"); err != nil || info.Partitions != 1 {
		t.Errorf("topic with default partitions: %+v, %v", info, err)
	}
	if ts := tn.backend.Topics(); len(ts) != 2 {
		t.Errorf("%d topics after the refusals; want exists and defaults", len(ts))
	}

	// Validate only: answered as a creation, nothing created.
	req.Topics = []kmsg.CreateTopicsRequestTopic{topic("dry", 4, 1, map[string]string{"cleanup.policy": "compact"}), topic("dry-bad", 1, 1, map[string]string{"segment.bytes": "1"})}
	req.ValidateOnly = true
	resp = c.do(req).(*kmsg.CreateTopicsResponse)
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 4 || resp.Topics[1].ErrorCode != errInvalidConfig {
		t.Errorf("validate only: %+v", resp.Topics)
	}
	if _, err := tn.backend.Topic("dry"); err == nil {
		t.Error("a validate-only request created its topic")
	}
}

// TestDeleteTopicsRefusals: an unknown name or id.
func TestDeleteTopicsRefusals(t *testing.T) {
	tn := startNode(t)
	c := dial(t, tn.addr)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("nope")}, {TopicID: [16]byte{1}}}
	resp := c.do(req).(*kmsg.DeleteTopicsResponse)
	if resp.Topics[0].ErrorCode != errUnknownTopicOrPartition || resp.Topics[1].ErrorCode != errUnknownTopicID {
		t.Errorf("codes %s, %s", errorName(resp.Topics[0].ErrorCode), errorName(resp.Topics[1].ErrorCode))
	}
	// By id.
	tn.createTopic("byid", 1, nil)
	info, _ := tn.backend.Topic("byid")
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: topicID(info)}}
	if resp := c.do(req).(*kmsg.DeleteTopicsResponse); resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "byid" {
		t.Errorf("delete by id: %+v", resp.Topics[0])
	}
}

// TestConfigsRefusals: describing an unknown topic, a broker (no settings)
// and another resource type; altering a broker, an unknown topic, a list
// operation on a setting that is not a list.
func TestConfigsRefusals(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("c", 1, nil)
	c := dial(t, tn.addr)
	d := kmsg.NewPtrDescribeConfigsRequest()
	d.SetVersion(4)
	d.Resources = []kmsg.DescribeConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "nope"},
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
		{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: "1"},
	}
	dr := c.do(d).(*kmsg.DescribeConfigsResponse).Resources
	if dr[0].ErrorCode != errUnknownTopicOrPartition || dr[1].ErrorCode != 0 || len(dr[1].Configs) != 0 || dr[2].ErrorCode != errInvalidRequest {
		t.Errorf("describe: %+v", dr)
	}
	a := kmsg.NewPtrIncrementalAlterConfigsRequest()
	a.SetVersion(1)
	set := func(name, value string, op kmsg.IncrementalAlterConfigOp) []kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: op, Value: kmsg.StringPtr(value)}}
	}
	a.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1", Configs: set("log.retention.ms", "1", kmsg.IncrementalAlterConfigOpSet)},
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "nope", Configs: set("retention.ms", "1", kmsg.IncrementalAlterConfigOpSet)},
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "c", Configs: set("retention.ms", "1", kmsg.IncrementalAlterConfigOpAppend)},
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "c", Configs: set("cleanup.policy", "delete", kmsg.IncrementalAlterConfigOpSubtract)},
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "c", Configs: append(set("retention.ms", "1", kmsg.IncrementalAlterConfigOpSet), set("retention.ms", "2", kmsg.IncrementalAlterConfigOpSet)...)},
	}
	ar := c.do(a).(*kmsg.IncrementalAlterConfigsResponse).Resources
	want := []int16{errInvalidRequest, errUnknownTopicOrPartition, errInvalidConfig, errInvalidConfig, errInvalidRequest}
	for i, w := range want {
		if ar[i].ErrorCode != w {
			t.Errorf("alter %d: %s (%v); want %s", i, errorName(ar[i].ErrorCode), ar[i].ErrorMessage, errorName(w))
		}
		if m := ar[i].ErrorMessage; m != nil && packagePrefix.MatchString(*m) {
			t.Errorf("alter %d: message %q names a Go package", i, *m)
		}
	}
	if info, _ := tn.backend.Topic("c"); info.Config["retention.ms"] != "604800000" || info.Config["cleanup.policy"] != "delete" {
		t.Errorf("settings changed by refused alters: %v", info.Config)
	}
	// Validate only changes nothing.
	a.ValidateOnly = true
	a.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "c", Configs: set("retention.ms", "5", kmsg.IncrementalAlterConfigOpSet)}}
	if ar := c.do(a).(*kmsg.IncrementalAlterConfigsResponse).Resources; ar[0].ErrorCode != 0 {
		t.Errorf("validate only: %s", errorName(ar[0].ErrorCode))
	}
	if info, _ := tn.backend.Topic("c"); info.Config["retention.ms"] != "604800000" {
		t.Errorf("a validate-only alter changed retention.ms to %s", info.Config["retention.ms"])
	}
}

func TestEditList(t *testing.T) {
	for _, tc := range []struct {
		cur, value string
		op         kmsg.IncrementalAlterConfigOp
		want       string
	}{
		{"delete", "compact", kmsg.IncrementalAlterConfigOpAppend, "compact,delete"},
		{"compact,delete", "delete", kmsg.IncrementalAlterConfigOpSubtract, "compact"},
		{"compact", "compact", kmsg.IncrementalAlterConfigOpAppend, "compact"},
		{"delete", "delete", kmsg.IncrementalAlterConfigOpSubtract, ""}, // empty: refused
		{"delete", "archive", kmsg.IncrementalAlterConfigOpAppend, ""},  // unknown: refused
		{"compact", "archive", kmsg.IncrementalAlterConfigOpSubtract, "compact"},
	} {
		got, err := editList(tc.cur, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: cleanupPolicy, Op: tc.op, Value: &tc.value})
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("%s %s %s: %q, %v; want %q", tc.cur, tc.op, tc.value, got, err, tc.want)
		}
	}
}

// TestAlterConfigsReplace: AlterConfigs replaces a topic's settings: the
// ones listed are set, every other goes back to its default, all or
// nothing; validate_only and a refused resource change nothing; a broker
// is INVALID_REQUEST, as in IncrementalAlterConfigs.
func TestAlterConfigsReplace(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("r", 1, map[string]string{"retention.ms": "1000", "segment.bytes": "1048576"})
	c := dial(t, tn.addr)
	alter := func(validate bool, typ kmsg.ConfigResourceType, name string, kv ...string) kmsg.AlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrAlterConfigsRequest()
		req.SetVersion(1)
		req.ValidateOnly = validate
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		for i := 0; i < len(kv); i += 2 {
			cfg := kmsg.NewAlterConfigsRequestResourceConfig()
			v := kv[i+1]
			cfg.Name, cfg.Value = kv[i], &v
			rr.Configs = append(rr.Configs, cfg)
		}
		req.Resources = append(req.Resources, rr)
		return c.do(req).(*kmsg.AlterConfigsResponse).Resources[0]
	}
	config := func() map[string]string {
		info, err := tn.backend.Topic("r")
		if err != nil {
			t.Fatal(err)
		}
		return info.Config
	}
	defaults := tn.backend.TopicConfigDefaults()

	for _, tc := range []struct {
		name     string
		validate bool
		typ      kmsg.ConfigResourceType
		kv       []string
		code     int16
	}{
		{name: "validate only", validate: true, typ: kmsg.ConfigResourceTypeTopic, kv: []string{"cleanup.policy", "compact"}},
		{name: "unknown setting", typ: kmsg.ConfigResourceTypeTopic, kv: []string{"cleanup.policy", "compact", "no.such", "1"}, code: errInvalidConfig},
		{name: "bad value", typ: kmsg.ConfigResourceTypeTopic, kv: []string{"retention.ms", "soon"}, code: errInvalidConfig},
		{name: "broker", typ: kmsg.ConfigResourceTypeBroker, kv: []string{"log.retention.ms", "1"}, code: errInvalidRequest},
	} {
		if got := alter(tc.validate, tc.typ, "r", tc.kv...); got.ErrorCode != tc.code {
			t.Errorf("%s: %s (%v), want %s", tc.name, errorName(got.ErrorCode), got.ErrorMessage, errorName(tc.code))
		}
		if cfg := config(); cfg["retention.ms"] != "1000" || cfg["segment.bytes"] != "1048576" || cfg["cleanup.policy"] != defaults["cleanup.policy"] {
			t.Fatalf("%s changed the settings: %v", tc.name, cfg)
		}
	}

	if got := alter(false, kmsg.ConfigResourceTypeTopic, "r", "cleanup.policy", "compact", "retention.ms", "5000"); got.ErrorCode != 0 {
		t.Fatalf("alter: %s (%v)", errorName(got.ErrorCode), got.ErrorMessage)
	}
	cfg := config()
	for k, def := range defaults {
		want := def
		switch k {
		case "cleanup.policy":
			want = "compact"
		case "retention.ms":
			want = "5000"
		}
		// A setting a topic shows only once set (one of a newer feature
		// level) is at its default when absent.
		if got, ok := cfg[k]; (ok || want != def) && got != want {
			t.Errorf("%s = %q after the replace, want %q", k, got, want)
		}
	}
	if got := alter(false, kmsg.ConfigResourceTypeTopic, "nope", "retention.ms", "1"); got.ErrorCode != errUnknownTopicOrPartition {
		t.Errorf("a missing topic: %s", errorName(got.ErrorCode))
	}
}
