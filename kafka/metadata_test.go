package kafka

import (
	"fmt"
	"slices"
	"testing"

	"github.com/logd-dev/logd/backend"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// threeNodes is a backend that sees itself (n1) in a group of three nodes
// plus a non-voter: the registry has the others' API addresses on other
// hosts and ports (each with the same Kafka port offset).
type threeNodes struct {
	backend.Kafka
	leader string
}

func (b threeNodes) Status() backend.Status {
	st := b.Kafka.Status()
	st.LeaderID = b.leader
	st.Members = []backend.Member{
		{ID: "n1", Suffrage: "voter"}, {ID: "n2", Suffrage: "voter"}, {ID: "n3", Suffrage: "voter"}, {ID: "learner", Suffrage: "nonvoter"},
	}
	return st
}

func (b threeNodes) NodeAPIAddress(id string) (string, bool) {
	addr, ok := map[string]string{"n1": "127.0.0.1:7070", "n2": "10.0.0.2:7080", "n3": "n3.example:7090", "learner": "10.0.0.9:7070"}[id]
	return addr, ok
}

// TestMetadataCluster: every member is a broker at its Kafka address (its
// API host, its API port plus this node's offset), the Raft leader leads
// every partition and is the controller, and the voters are the replicas.
func TestMetadataCluster(t *testing.T) {
	for _, leader := range []string{"n2", ""} {
		t.Run("leader="+leader, func(t *testing.T) {
			tn := startNode(t, func(o *Options) {
				o.Backend = threeNodes{Kafka: o.Backend, leader: leader}
				peers, err := PortOffset("127.0.0.1:7070", o.Advertise)
				if err != nil {
					t.Fatal(err)
				}
				o.PeerAddress = peers
			})
			tn.createTopic("m", 2, nil)
			_, port, _ := splitHostPort(tn.addr)
			offset := port - 7070
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(12)
			resp := dial(t, tn.addr).do(req).(*kmsg.MetadataResponse)
			var brokers []string
			for _, b := range resp.Brokers {
				brokers = append(brokers, fmt.Sprintf("%d@%s:%d", b.NodeID, b.Host, b.Port))
			}
			learner := brokerIDs([]string{"n1", "n2", "n3", "learner"})["learner"]
			want := []string{
				fmt.Sprintf("1@127.0.0.1:%d", port),
				fmt.Sprintf("2@10.0.0.2:%d", 7080+offset),
				fmt.Sprintf("3@n3.example:%d", 7090+offset),
				fmt.Sprintf("%d@10.0.0.9:%d", learner, 7070+offset),
			}
			if !slices.Equal(brokers, want) {
				t.Errorf("brokers %v; want %v", brokers, want)
			}
			wantLeader, wantCode := int32(2), errNone
			if leader == "" {
				wantLeader, wantCode = -1, errLeaderNotAvailable
			}
			if resp.ControllerID != wantLeader {
				t.Errorf("controller %d; want %d", resp.ControllerID, wantLeader)
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.Leader != wantLeader || p.ErrorCode != wantCode || !slices.Equal(p.Replicas, []int32{1, 2, 3}) || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
					t.Errorf("partition %d: leader %d code %d replicas %v isr %v", p.Partition, p.Leader, p.ErrorCode, p.Replicas, p.ISR)
				}
			}
		})
	}
}

// TestMetadataAutoCreate: a Metadata request for a missing topic creates
// it only when the node allows it and the request does (always before
// version 4).
func TestMetadataAutoCreate(t *testing.T) {
	ask := func(t *testing.T, tn *testNode, topic string, version int16, allow bool) int16 {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(version)
		req.AllowAutoTopicCreation = allow
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		return dial(t, tn.addr).do(req).(*kmsg.MetadataResponse).Topics[0].ErrorCode
	}
	exists := func(tn *testNode, topic string) bool { _, err := tn.backend.Topic(topic); return err == nil }

	off := startNode(t)
	if code := ask(t, off, "a", 9, true); code != errUnknownTopicOrPartition || exists(off, "a") {
		t.Errorf("auto-creation off: code %s, created %v", errorName(code), exists(off, "a"))
	}
	on := startNode(t, func(o *Options) { o.AutoCreateTopics = true })
	if code := ask(t, on, "b", 9, false); code != errUnknownTopicOrPartition || exists(on, "b") {
		t.Errorf("request does not allow it: code %s, created %v", errorName(code), exists(on, "b"))
	}
	for _, v := range []int16{3, 9} {
		topic := fmt.Sprintf("c%d", v)
		if code := ask(t, on, topic, v, true); code != 0 || !exists(on, topic) {
			t.Errorf("v%d: code %s, created %v", v, errorName(code), exists(on, topic))
		}
		if code := ask(t, on, topic, v, true); code != 0 {
			t.Errorf("v%d again: code %s", v, errorName(code))
		}
	}
	if code := ask(t, on, "bad/name", 9, true); code != errInvalidTopic {
		t.Errorf("invalid name: %s", errorName(code))
	}
	// By topic id (version 10+): known, and unknown.
	info, _ := on.backend.Topic("c9")
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: topicID(info)}, {TopicID: [16]byte{9}}}
	resp := dial(t, on.addr).do(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "c9" || resp.Topics[1].ErrorCode != errUnknownTopicID {
		t.Errorf("by id: %+v", resp.Topics)
	}
}

func TestBrokerIDs(t *testing.T) {
	ids := brokerIDs([]string{"n2", "n1", "node-3", "n03", "alpha", "beta", "n1234567890"})
	for node, want := range map[string]int32{"n1": 1, "n2": 2, "n03": 3} {
		if ids[node] != want {
			t.Errorf("%s: %d; want %d", node, ids[node], want)
		}
	}
	seen := map[int32]string{}
	for node, id := range ids {
		if prev, dup := seen[id]; dup {
			t.Errorf("%s and %s share id %d", prev, node, id)
		}
		seen[id] = node
		if _, numbered := map[string]bool{"n1": true, "n2": true, "n03": true}[node]; !numbered && id < hashedIDBase {
			t.Errorf("%s: id %d; want a hashed id (node-3's number went to n03, first in order)", node, id)
		}
	}
	// The same members in any order give the same ids.
	again := brokerIDs([]string{"beta", "n1234567890", "alpha", "n03", "node-3", "n1", "n2"})
	for node, id := range ids {
		if again[node] != id {
			t.Errorf("%s: %d, then %d", node, id, again[node])
		}
	}
}

func TestPortOffset(t *testing.T) {
	peer, err := PortOffset("127.0.0.1:7070", "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for api, want := range map[string]string{"127.0.0.1:7080": "127.0.0.1:9102", "[::1]:7070": "[::1]:9092", "h:65000": "", "bad": ""} {
		got, ok := peer(api)
		if got != want || ok != (want != "") {
			t.Errorf("%s: %q %v; want %q", api, got, ok, want)
		}
	}
	if _, err := PortOffset("127.0.0.1:7070", "127.0.0.1"); err == nil {
		t.Error("no port: no error")
	}
}

// registeredNodes is a backend that sees itself as node self in a group
// of three voters led by n1: n1 and n2 registered their Kafka addresses,
// n3 (a build before the field) only its API address.
type registeredNodes struct {
	backend.Kafka
	self  string
	api   map[string]string
	kafka map[string]string
}

func (b registeredNodes) NodeID() string { return b.self }

func (b registeredNodes) Status() backend.Status {
	st := b.Kafka.Status()
	st.NodeID, st.LeaderID = b.self, "n1"
	st.Members = []backend.Member{{ID: "n1", Suffrage: "voter"}, {ID: "n2", Suffrage: "voter"}, {ID: "n3", Suffrage: "voter"}}
	return st
}

func (b registeredNodes) NodeAPIAddress(id string) (string, bool) {
	a, ok := b.api[id]
	return a, ok
}

func (b registeredNodes) NodeKafkaAddress(id string) (string, bool) {
	a, ok := b.kafka[id]
	return a, ok
}

// TestMetadataRegisteredAddresses: two nodes whose Kafka ports sit at
// different offsets from their API ports each give the other's Kafka
// address as it registered it, so both are right from either node; a node
// that registered none is still derived from its API address by the
// asking node's offset.
func TestMetadataRegisteredAddresses(t *testing.T) {
	api := map[string]string{"n1": "127.0.0.1:7070", "n2": "127.0.0.1:7080", "n3": "10.0.0.3:7090"}
	kafkaAddrs := map[string]string{} // filled once both listen
	start := func(self string) *testNode {
		return startNode(t, func(o *Options) {
			o.Backend = registeredNodes{Kafka: o.Backend, self: self, api: api, kafka: kafkaAddrs}
			peers, err := PortOffset(api[self], o.Advertise)
			if err != nil {
				t.Fatal(err)
			}
			o.PeerAddress = peers
		})
	}
	n1, n2 := start("n1"), start("n2")
	kafkaAddrs["n1"], kafkaAddrs["n2"] = n1.addr, n2.addr
	offset := func(tn *testNode, self string) int32 {
		_, k, _ := splitHostPort(tn.addr)
		_, a, _ := splitHostPort(api[self])
		return k - a
	}
	if offset(n1, "n1") == offset(n2, "n2") {
		t.Skipf("both listeners got ports at the same offset (%s, %s); the test needs two", n1.addr, n2.addr)
	}
	for _, tc := range []struct {
		self string
		tn   *testNode
	}{{"n1", n1}, {"n2", n2}} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		resp := dial(t, tc.tn.addr).do(req).(*kmsg.MetadataResponse)
		var got []string
		for _, b := range resp.Brokers {
			got = append(got, fmt.Sprintf("%d@%s:%d", b.NodeID, b.Host, b.Port))
		}
		want := []string{"1@" + n1.addr, "2@" + n2.addr, fmt.Sprintf("3@10.0.0.3:%d", 7090+offset(tc.tn, tc.self))}
		if !slices.Equal(got, want) {
			t.Errorf("asking %s: brokers %v; want %v", tc.self, got, want)
		}
	}
}
