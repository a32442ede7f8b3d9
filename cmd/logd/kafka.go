package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/logd-dev/logd/kafka"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/server"
)

// The Kafka-protocol listener (package kafka): its flags and its wiring
// into run. docs/kafka.md describes it.

// defaultKafkaListen is where the embedded default (no --listen, no
// LOGD_LISTEN) serves the Kafka protocol, Kafka's usual port.
const defaultKafkaListen = "127.0.0.1:9092"

// kafkaConfig is the Kafka listener's configuration.
type kafkaConfig struct {
	// listen is the listener's address; "" switches it off.
	listen string
	// advertise is the address Metadata gives for this node; default the
	// address listen bound.
	advertise string
	// autoCreate lets Metadata requests create the topics they name.
	autoCreate bool
	// insecure says what --insecure-allow-plaintext let the listener
	// expose ("" when it is on loopback); startKafka logs it.
	insecure string
}

// addKafkaFlags registers the Kafka flags on fs (env gives LOGD_*
// defaults) and returns the function that reads them once fs is parsed:
// without --kafka-listen (or LOGD_KAFKA_LISTEN) the listener is on, at
// defaultKafkaListen, only on the embedded default, where no --listen (nor
// LOGD_LISTEN) is given either; --kafka-listen "" switches it off.
//
// The listener authenticates nobody and encrypts nothing yet (no TLS, no
// SASL), so under --auth required it is off unless asked for, and asking
// for it is an error: it would let anyone past the ACLs. As the API's, it
// follows the loopback rule (docs/security.md): off loopback it needs
// --insecure-allow-plaintext.
func addKafkaFlags(fs *flag.FlagSet, env func(name, def string) string) func(getenv func(string) string, authRequired, insecurePlaintext bool) (kafkaConfig, error) {
	var c kafkaConfig
	autoEnv := env("LOGD_KAFKA_AUTO_CREATE_TOPICS", "false")
	autoDef, autoErr := strconv.ParseBool(autoEnv)
	fs.StringVar(&c.listen, "kafka-listen", env("LOGD_KAFKA_LISTEN", ""),
		"Kafka-protocol listen address; default "+defaultKafkaListen+" when --listen is not given either, else off; \"\" switches it off (LOGD_KAFKA_LISTEN)")
	fs.StringVar(&c.advertise, "kafka-advertise", env("LOGD_KAFKA_ADVERTISE", ""),
		"Kafka address clients are given for this node; default the --kafka-listen address. Other nodes are given as their API host with their API port plus the same offset as this node's (LOGD_KAFKA_ADVERTISE)")
	fs.BoolVar(&c.autoCreate, "kafka-auto-create-topics", autoDef,
		"let Kafka Metadata requests create the topics they name, with one partition (LOGD_KAFKA_AUTO_CREATE_TOPICS=true)")
	return func(getenv func(string) string, authRequired, insecurePlaintext bool) (kafkaConfig, error) {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["kafka-listen"] && getenv("LOGD_KAFKA_LISTEN") == "" && !given["listen"] && getenv("LOGD_LISTEN") == "" && !authRequired {
			c.listen = defaultKafkaListen
		}
		if authRequired && c.listen != "" {
			return c, errors.New("--kafka-listen: the Kafka listener authenticates nobody yet (no TLS or SASL), so it cannot serve under --auth required")
		}
		if autoErr != nil {
			return c, fmt.Errorf("LOGD_KAFKA_AUTO_CREATE_TOPICS: want true or false, got %q", autoEnv)
		}
		if c.listen == "" && c.advertise != "" {
			return c, errors.New("--kafka-advertise needs the Kafka listener (--kafka-listen)")
		}
		var exposed []string
		for _, f := range []struct{ flag, addr string }{{"--kafka-listen", c.listen}, {"--kafka-advertise", c.advertise}} {
			if f.addr != "" && !isLoopback(f.addr) {
				exposed = append(exposed, f.flag+" "+f.addr)
			}
		}
		if len(exposed) > 0 {
			msg := strings.Join(exposed, ", ") + " not on loopback: the Kafka listener has no TLS and no authentication yet"
			if !insecurePlaintext {
				return c, fmt.Errorf("%s; --insecure-allow-plaintext serves it all the same (docs/kafka.md)", msg)
			}
			c.insecure = msg
		}
		return c, nil
	}
}

// bind binds the Kafka listener, before Raft starts (a port in use fails
// at once), and checks the advertised addresses. With the listener on, the
// client connection cap is shared: each of the two listeners gets half,
// so that together they stay under the open-file limit less the reserve
// (connCaps). It returns a nil listener when the Kafka listener is off.
func (k *kafkaConfig) bind(apiAdvertise string, conns server.ConnLimits) (net.Listener, server.ConnLimits, error) {
	if k.listen == "" {
		return nil, conns, nil
	}
	ln, err := net.Listen("tcp", k.listen)
	if err != nil {
		return nil, conns, fmt.Errorf("kafka listen on %s: %w (--kafka-listen \"\" switches the Kafka listener off)", k.listen, err)
	}
	if k.advertise == "" {
		k.advertise = ln.Addr().String()
	}
	if _, err := kafka.PortOffset(apiAdvertise, k.advertise); err != nil {
		ln.Close()
		return nil, conns, fmt.Errorf("--kafka-advertise: %w", err)
	}
	if conns.Max > 1 {
		conns.Max /= 2
	}
	return ln, conns, nil
}

// newRegistry is the metrics registry the API and the Kafka listener share
// (as server.New would make it).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// startKafka serves the Kafka protocol on ln (nil: off) under srv's
// connection limits, and returns the function that stops it.
func startKafka(k kafkaConfig, ln net.Listener, backend *replication.Backend, srv *server.Server, reg prometheus.Registerer,
	apiAdvertise string, limits limitConfig, logger *slog.Logger) func() {
	if ln == nil {
		return func() {}
	}
	peers, _ := kafka.PortOffset(apiAdvertise, k.advertise) // checked by bind
	ks, err := kafka.New(kafka.Options{
		Backend: backend, Advertise: k.advertise, PeerAddress: peers, AutoCreateTopics: k.autoCreate,
		Limits: kafka.Limits{
			MaxRequestBytes: off(limits.maxRequestBytes),
			InflightBytes:   off(limits.inflightBytes),
		},
		Registerer: reg, Logger: logger,
	})
	if err != nil {
		// Only options bind checked can fail here.
		logger.Error("kafka listener not started", "err", err)
		ln.Close()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ks.Serve(srv.Listener(ln, "kafka")); err != nil && !errors.Is(err, kafka.ErrServerClosed) {
			logger.Error("kafka listener stopped", "err", err)
		}
	}()
	if k.insecure != "" {
		logger.Warn("INSECURE: --insecure-allow-plaintext: anyone who reaches the Kafka listener can read and change every topic", "exposed", k.insecure)
	}
	logger.Info("kafka listener started", "listen", ln.Addr().String(), "advertise", k.advertise, "auto_create_topics", k.autoCreate)
	return func() {
		if err := ks.Close(); err != nil {
			logger.Warn("kafka shutdown", "err", err)
		}
		<-done
	}
}
