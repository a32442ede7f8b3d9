package server

import (
	"sync"

	"github.com/logd-dev/logd/backend"
	"github.com/prometheus/client_golang/prometheus"
)

// TopicTraffic counts, per topic, the records and bytes this node's
// front ends took in (produce) and gave out (fetch): the Connect API's
// handlers and the Kafka listener (Server.TopicTraffic) add to the same
// two families. Its labels are bounded by the topics that exist: a scrape
// drops the counts of topics no longer in the backend, so a deleted
// topic's series end (and start over from zero should the name be created
// again).
//
// Bytes are what each front end's clients send and receive as records:
// the Connect API counts key and value bytes where it handles records
// (a produce, a fetch of records), the record batch bytes as stored
// where it serves batches without decoding them (a fetch of batches, the
// Go client's), and so does the Kafka listener (compressed when the
// producer compressed them), as Kafka's own BytesInPerSec and
// BytesOutPerSec do.
type TopicTraffic struct {
	b  backend.API
	mu sync.Mutex
	// counts is guarded by mu.
	counts map[string]*topicCounts
}

// topicCounts are one topic's totals.
type topicCounts struct {
	recordsIn, recordsOut, bytesIn, bytesOut float64
}

var (
	descTopicRecords = prometheus.NewDesc("logd_topic_records_total",
		"Records produced to (direction in) or fetched from (out) the topic through this node's Connect API and Kafka listener.", []string{"topic", "direction"}, nil)
	descTopicBytes = prometheus.NewDesc("logd_topic_bytes_total",
		"Record bytes produced to (direction in) or fetched from (out) the topic through this node's front ends: key and value bytes through the Connect API's produce and fetch of records, record batch bytes as stored through its fetch of batches and the Kafka listener.", []string{"topic", "direction"}, nil)
)

func newTopicTraffic(reg *prometheus.Registry, b backend.API) *TopicTraffic {
	t := &TopicTraffic{b: b, counts: make(map[string]*topicCounts)}
	reg.MustRegister(t)
	return t
}

// TopicTraffic returns the node's per-topic counters, for the node's other
// front end (the Kafka listener) to count into the same series.
func (s *Server) TopicTraffic() *TopicTraffic { return s.traffic }

// Add counts records and bytes of topic, in (produce) or out (fetch). It
// is safe for concurrent use.
func (t *TopicTraffic) Add(topic string, in bool, records int, bytes int64) {
	if records == 0 && bytes == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts[topic]
	if c == nil {
		c = new(topicCounts)
		t.counts[topic] = c
	}
	if in {
		c.recordsIn += float64(records)
		c.bytesIn += float64(bytes)
	} else {
		c.recordsOut += float64(records)
		c.bytesOut += float64(bytes)
	}
}

// Describe implements prometheus.Collector.
func (t *TopicTraffic) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTopicRecords
	ch <- descTopicBytes
}

// Collect implements prometheus.Collector.
func (t *TopicTraffic) Collect(ch chan<- prometheus.Metric) {
	exists := make(map[string]bool)
	for _, st := range t.b.TopicStates() {
		exists[st.Topic.Name] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, c := range t.counts {
		if !exists[name] {
			delete(t.counts, name)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descTopicRecords, prometheus.CounterValue, c.recordsIn, name, "in")
		ch <- prometheus.MustNewConstMetric(descTopicRecords, prometheus.CounterValue, c.recordsOut, name, "out")
		ch <- prometheus.MustNewConstMetric(descTopicBytes, prometheus.CounterValue, c.bytesIn, name, "in")
		ch <- prometheus.MustNewConstMetric(descTopicBytes, prometheus.CounterValue, c.bytesOut, name, "out")
	}
}
