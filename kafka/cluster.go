package kafka

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/logd-dev/logd/backend"
)

// How the Raft group looks to a Kafka client: every member is a broker,
// the Raft leader leads every partition (and is the controller), the
// voters are every partition's replicas, and those that answered the
// leader within inSyncLag its in-sync replicas (a follower, which cannot
// tell, lists every voter). A data group's partitions are its leader's,
// replicas' and voters' in the same way (clusterView.groups).

// broker is one node as Metadata lists it.
type broker struct {
	id   int32
	node string
	host string
	port int32
}

// clusterView is the Raft group at one moment, in Kafka's terms.
type clusterView struct {
	// brokers are the members whose Kafka address is known, by id.
	brokers []broker
	// leader is the leader's broker id; -1 when there is none, or its
	// Kafka address is not known.
	leader int32
	// replicas are the voters' broker ids, sorted; isr those the leader
	// is in contact with.
	replicas, isr []int32
	// groups are the data groups this node knows a leader of: their
	// leader, replicas and voters (docs/architecture.md, "Data groups").
	groups map[uint64]dataGroupView
}

// dataGroupView is one data group in Kafka's terms: the partitions it holds
// are led by its leader, replicated on its replicas, in sync on its
// voters.
type dataGroupView struct {
	leader        int32
	replicas, isr []int32
}

// partition returns the leader, replicas and in-sync replicas of a
// partition in data group g (placed: the topic has a placement): the
// group's when this node knows its leader, else the meta group's, whose
// leader routes a produce to the group's (replication's routing).
func (v clusterView) partition(placed bool, g uint64) (leader int32, replicas, isr []int32) {
	if gv, ok := v.groups[g]; ok && placed {
		return gv.leader, gv.replicas, gv.isr
	}
	return v.leader, v.replicas, v.isr
}

// cluster returns the Raft group as this node sees it now.
func (s *Server) cluster() clusterView {
	st := s.b.Status()
	self := s.b.NodeID()
	nodes := make([]string, 0, len(st.Members)+1)
	voters := map[string]bool{}
	for _, m := range st.Members {
		nodes = append(nodes, m.ID)
		voters[m.ID] = m.Suffrage == "voter"
	}
	if !slices.Contains(nodes, self) {
		// Not (or no longer) in the configuration it knows: still a broker
		// a client may talk to, if only to learn where the others are.
		nodes = append(nodes, self)
	}
	ids := brokerIDs(nodes)
	lost := s.outOfSync(st, self)
	now := time.Now()
	v := clusterView{leader: -1}
	for _, n := range nodes {
		addr, ok := s.kafkaAddress(n, self)
		if !ok {
			continue
		}
		host, port, err := splitHostPort(addr)
		if err != nil {
			continue
		}
		id := ids[n]
		v.brokers = append(v.brokers, broker{id: id, node: n, host: host, port: port})
		if voters[n] {
			v.replicas = append(v.replicas, id)
			if !lost[n] {
				v.isr = append(v.isr, id)
			}
		}
		if n == st.LeaderID {
			v.leader = id
		}
	}
	slices.SortFunc(v.brokers, func(a, b broker) int { return int(a.id) - int(b.id) })
	slices.Sort(v.replicas)
	slices.Sort(v.isr)
	known := map[string]bool{}
	for _, b := range v.brokers {
		known[b.node] = true
	}
	for _, g := range st.DataGroups {
		if g.LeaderID == "" || !known[g.LeaderID] {
			continue
		}
		gv := dataGroupView{leader: ids[g.LeaderID]}
		for _, r := range g.Replicas {
			if known[r] {
				gv.replicas = append(gv.replicas, ids[r])
			}
		}
		// In sync: the voters, less those that have not answered the
		// group's leader within inSyncLag when this node leads it (a
		// follower cannot tell, and lists every voter).
		glost := lagging(g.Followers, now)
		for _, r := range g.Voters {
			if known[r] && !glost[r] {
				gv.isr = append(gv.isr, ids[r])
			}
		}
		slices.Sort(gv.replicas)
		slices.Sort(gv.isr)
		if v.groups == nil {
			v.groups = map[uint64]dataGroupView{}
		}
		v.groups[g.ID] = gv
	}
	return v
}

// inSyncLag is how long ago a follower may have last answered the leader
// and still count as in sync, as Kafka's replica.lag.time.max.ms (30 s
// there; the leader heartbeats many times a second here).
const inSyncLag = 5 * time.Second

// outOfSync returns, on the leader, the voters that have not answered it
// within inSyncLag (replication's follower stats: AppendEntries answers,
// heartbeats included); none elsewhere, where it cannot be told.
func (s *Server) outOfSync(st backend.Status, self string) map[string]bool {
	if st.LeaderID != self {
		return nil
	}
	return lagging(s.b.RaftMetrics().Followers, time.Now())
}

// lagging returns the followers among fs that have not answered their
// leader within inSyncLag of now.
func lagging(fs []backend.FollowerStats, now time.Time) map[string]bool {
	lost := map[string]bool{}
	for _, f := range fs {
		if f.LastContact.IsZero() || now.Sub(f.LastContact) > inSyncLag {
			lost[f.ID] = true
		}
	}
	return lost
}

// kafkaAddress returns a node's Kafka address: this node's as advertised,
// another's as it registered it, or, when it registered none (a build
// before the field), derived from its registered API address.
func (s *Server) kafkaAddress(node, self string) (string, bool) {
	if node == self {
		return s.advertise, true
	}
	if addr, ok := s.b.NodeKafkaAddress(node); ok {
		return addr, true
	}
	if s.peer == nil {
		return "", false
	}
	api, ok := s.b.NodeAPIAddress(node)
	if !ok || api == "" {
		return "", false
	}
	return s.peer(api)
}

// PortOffset returns the rule by which a node derives the Kafka address of
// a node that registered none (a build before nodes registered theirs)
// from its registered client API address: the same host, and the API port
// shifted by the difference between this node's own Kafka and API ports.
// It is right only while both nodes keep the same difference, as
// docs/kafka.md says; a node that registered its Kafka address is given
// as it registered it.
func PortOffset(selfAPI, selfKafka string) (func(apiAddress string) (string, bool), error) {
	_, apiPort, err := splitHostPort(selfAPI)
	if err != nil {
		return nil, fmt.Errorf("kafka: API address %q: %w", selfAPI, err)
	}
	_, kafkaPort, err := splitHostPort(selfKafka)
	if err != nil {
		return nil, fmt.Errorf("kafka: Kafka address %q: %w", selfKafka, err)
	}
	offset := kafkaPort - apiPort
	return func(api string) (string, bool) {
		host, port, err := splitHostPort(api)
		if err != nil {
			return "", false
		}
		p := port + offset
		if p <= 0 || p > 65535 {
			return "", false
		}
		return net.JoinHostPort(host, strconv.Itoa(int(p))), true
	}, nil
}

// Broker ids. Kafka numbers brokers with int32s and logd names nodes with
// strings, so a node whose id ends in a number (n1, node-3) is that broker
// (below 2^30), and any other node, or one whose number another node took
// first (in id order), gets a hash of its id at or above 2^30. Every node
// computes the same ids from the same members.
const (
	hashedIDBase = 1 << 30
	maxSuffixID  = hashedIDBase - 1
)

// brokerIDs numbers nodes.
func brokerIDs(nodes []string) map[string]int32 {
	sorted := slices.Clone(nodes)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	ids := make(map[string]int32, len(sorted))
	used := map[int32]bool{}
	var rest []string
	for _, n := range sorted {
		if id, ok := numericSuffix(n); ok && !used[id] {
			ids[n], used[id] = id, true
			continue
		}
		rest = append(rest, n)
	}
	for _, n := range rest {
		h := fnv.New32a()
		h.Write([]byte(n))
		off := h.Sum32() % hashedIDBase
		id := int32(hashedIDBase + off)
		for used[id] {
			off = (off + 1) % hashedIDBase
			id = int32(hashedIDBase + off)
		}
		ids[n], used[id] = id, true
	}
	return ids
}

// numericSuffix returns the number a node id ends with, if it has one of
// at most nine digits.
func numericSuffix(id string) (int32, bool) {
	i := len(id)
	for i > 0 && id[i-1] >= '0' && id[i-1] <= '9' {
		i--
	}
	digits := id[i:]
	if digits == "" || len(digits) > 9 {
		return 0, false
	}
	v, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || v > maxSuffixID {
		return 0, false
	}
	return int32(v), true
}

// topicID is a topic's Kafka topic id: a hash of its name and creation
// time, so that every node gives the same id and a topic deleted and
// created again gets a new one.
func topicID(t backend.TopicInfo) [16]byte {
	h := sha256.New()
	h.Write([]byte(t.Name))
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(t.CreatedNanos))
	h.Write(ts[:])
	var id [16]byte
	copy(id[:], h.Sum(nil))
	return id
}
