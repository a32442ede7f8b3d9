package kafka

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/internal/membudget"
)

// metrics are the front end's Prometheus metrics, per API key where it
// applies (label api: kmsg's name of the key, e.g. "Produce").
type metrics struct {
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// refused counts requests that closed their connection: a key or
	// version not served, a malformed or oversized request.
	refused *prometheus.CounterVec
	// unauthenticated counts connections closed before their first
	// request (auth.go).
	unauthenticated *prometheus.CounterVec
	connsOpen       prometheus.Gauge
	connsTotal      prometheus.Counter
	budgetBytes     prometheus.GaugeFunc
	records         *prometheus.CounterVec
	bytes           *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, b *membudget.Budget) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_kafka_requests_total", Help: "Kafka-protocol requests handled, by API.",
		}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_kafka_request_errors_total", Help: "Error codes answered, by API and code (a request answering several partitions counts each code once).",
		}, []string{"api", "error"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "logd_kafka_request_duration_seconds", Help: "Time from reading a Kafka request to writing its response, by API (long polls included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"api"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_kafka_connections_closed_on_request_total", Help: "Connections closed because of a request: a key or version not served, malformed, or larger than the request bound.",
		}, []string{"reason"}),
		unauthenticated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_kafka_connections_refused_total", Help: "Kafka-protocol connections closed before their first request: a failed TLS handshake, or under --auth required no verified client certificate naming a principal.",
		}, []string{"reason"}),
		connsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "logd_kafka_connections_open", Help: "Kafka-protocol connections open.",
		}),
		connsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logd_kafka_connections_total", Help: "Kafka-protocol connections accepted.",
		}),
		budgetBytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "logd_kafka_inflight_request_bytes", Help: "Bytes of Kafka requests being read or handled (the memory budget's use).",
		}, func() float64 { return float64(b.Stats().InUse) }),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_kafka_records_total", Help: "Records appended by Kafka produce requests (op=produce).",
		}, []string{"op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_kafka_batch_bytes_total", Help: "Record batch bytes appended (op=produce) and served (op=fetch).",
		}, []string{"op"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.errors, m.latency, m.refused, m.unauthenticated, m.connsOpen, m.connsTotal, m.budgetBytes, m.records, m.bytes)
	}
	return m
}

// apiName is a key's label value.
func apiName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return "Unknown" + strconv.Itoa(int(key))
}

// TopicTraffic counts records and bytes per topic, in (produce) or out
// (fetch), into series the node's front ends share
// (server.Server.TopicTraffic). This listener counts the record batch
// bytes it appends and serves, as stored: it never decodes a fetched
// batch to count key and value bytes. Add is called from any goroutine.
type TopicTraffic interface {
	Add(topic string, in bool, records int, bytes int64)
}

// noTraffic counts nothing (Options.Traffic nil).
type noTraffic struct{}

func (noTraffic) Add(string, bool, int, int64) {}
