package main

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/kafka"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/server"
)

// The Kafka-protocol listener (package kafka): its flags and its wiring
// into run. docs/kafka.md describes it.

// defaultKafkaListen is where the embedded default (no --listen, no
// LOGD_LISTEN) serves the Kafka protocol, Kafka's usual port.
const defaultKafkaListen = "127.0.0.1:9092"

// maxGroupDelay bounds --kafka-group-initial-rebalance-delay: a group
// waits at most its members' rebalance timeout anyway (docs/kafka.md).
const maxGroupDelay = 5 * time.Minute

// Bounds of --kafka-share-session-timeout and
// --kafka-share-heartbeat-interval: a member must be told to heartbeat
// more often than it is expired for silence.
const (
	minShareSessionTimeout = time.Second
	maxShareSessionTimeout = time.Hour
	minShareHeartbeat      = 100 * time.Millisecond
)

// kafkaConfig is the Kafka listener's configuration.
type kafkaConfig struct {
	// listen is the listener's address; "" switches it off.
	listen string
	// advertise is the address Metadata gives for this node; default the
	// address listen bound.
	advertise string
	// autoCreate lets Metadata requests create the topics they name.
	autoCreate bool
	// groupDelay is how long a Kafka group that was empty waits for more
	// members before its first generation (Kafka's
	// group.initial.rebalance.delay.ms); 0 waits for nothing.
	groupDelay time.Duration
	// shareSession and shareHeartbeat are share groups' session timeout
	// and heartbeat interval (Kafka's group.share.session.timeout.ms and
	// group.share.heartbeat.interval.ms): a member silent for
	// shareSession is removed and its records released.
	shareSession, shareHeartbeat time.Duration
	// tls serves the listener over TLS with the API's certificate
	// (--tls-cert, --tls-key), asking for client certificates as
	// clientAuth says (kafkaClientAuth).
	tls        bool
	clientAuth tls.ClientAuthType
	// insecure says what --insecure-allow-plaintext let the listener
	// expose ("" when it is on loopback); startKafka logs it.
	insecure string
	// sasl is the enabled SASL mechanisms (--kafka-sasl-mechanisms),
	// saslFlag the flag as given.
	sasl     []string
	saslFlag string
}

// addKafkaFlags registers the Kafka flags on fs (env gives LOGD_*
// defaults) and returns the function that reads them once fs is parsed:
// without --kafka-listen (or LOGD_KAFKA_LISTEN) the listener is on, at
// defaultKafkaListen, only on the embedded default, where no --listen (nor
// LOGD_LISTEN) is given either; --kafka-listen "" switches it off.
//
// The listener serves TLS whenever the API does, with the same
// certificate (docs/security.md, "Kafka listener"). Its credentials are a
// client certificate and, with --kafka-sasl-mechanisms, SASL (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512). Under --auth required without SASL it
// needs TLS with client certificates (--tls-client-ca, or peer TLS's
// cluster CA): without them it is off unless asked for, and asking for it
// is an error, since it would let nobody in; with SASL, a certificate is
// verified when given but not required. As the API, it follows the
// loopback rule: off loopback it needs TLS and --auth required, or
// --insecure-allow-plaintext; SASL off loopback without TLS is refused
// with its own message (passwords would cross the network in the clear)
// unless --insecure-allow-plaintext.
//
// The function it returns takes configured, which says whether a flag was
// given by any source (flag, environment or file; config.go).
func addKafkaFlags(fs *pflag.FlagSet) func(configured func(name string) bool, authRequired bool, t tlsConfig) (kafkaConfig, error) {
	var c kafkaConfig
	fs.StringVar(&c.listen, "kafka-listen", "",
		"Kafka-protocol listen address; default "+defaultKafkaListen+" when --listen is not given either, else off; \"\" switches it off (LOGD_KAFKA_LISTEN)")
	fs.StringVar(&c.advertise, "kafka-advertise", "",
		"Kafka address clients are given for this node, registered for the other nodes' Metadata answers; default the --kafka-listen address (LOGD_KAFKA_ADVERTISE)")
	fs.BoolVar(&c.autoCreate, "kafka-auto-create-topics", false,
		"let Kafka Metadata requests create the topics they name, with one partition (LOGD_KAFKA_AUTO_CREATE_TOPICS=true)")
	fs.StringVar(&c.saslFlag, "kafka-sasl-mechanisms", "",
		"SASL mechanisms the Kafka listener serves, comma-separated: "+strings.Join(kafka.Mechanisms, ", ")+"; none by default (LOGD_KAFKA_SASL_MECHANISMS)")
	fs.DurationVar(&c.groupDelay, "kafka-group-initial-rebalance-delay", kafka.DefaultInitialRebalanceDelay,
		"how long a Kafka consumer group that was empty waits for more members before its first generation, as Kafka's group.initial.rebalance.delay.ms; 0 waits for nothing (LOGD_KAFKA_GROUP_INITIAL_REBALANCE_DELAY)")
	fs.DurationVar(&c.shareSession, "kafka-share-session-timeout", kafka.DefaultShareSessionTimeout,
		"how long a share-group member lives without a heartbeat before its records are released, as Kafka's group.share.session.timeout.ms (LOGD_KAFKA_SHARE_SESSION_TIMEOUT)")
	fs.DurationVar(&c.shareHeartbeat, "kafka-share-heartbeat-interval", kafka.DefaultShareHeartbeatInterval,
		"the heartbeat interval share-group members are told, as Kafka's group.share.heartbeat.interval.ms; below --kafka-share-session-timeout (LOGD_KAFKA_SHARE_HEARTBEAT_INTERVAL)")
	return func(configured func(name string) bool, authRequired bool, t tlsConfig) (kafkaConfig, error) {
		if c.groupDelay < 0 || c.groupDelay > maxGroupDelay {
			return c, fmt.Errorf("--kafka-group-initial-rebalance-delay: want a duration from 0 to %s, got %s", maxGroupDelay, c.groupDelay)
		}
		if c.shareSession < minShareSessionTimeout || c.shareSession > maxShareSessionTimeout {
			return c, fmt.Errorf("--kafka-share-session-timeout: want a duration from %s to %s, got %s", minShareSessionTimeout, maxShareSessionTimeout, c.shareSession)
		}
		if c.shareHeartbeat < minShareHeartbeat || c.shareHeartbeat >= c.shareSession {
			return c, fmt.Errorf("--kafka-share-heartbeat-interval: want a duration from %s to below --kafka-share-session-timeout (%s), got %s", minShareHeartbeat, c.shareSession, c.shareHeartbeat)
		}
		sasl, err := parseMechanisms(c.saslFlag)
		if err != nil {
			return c, err
		}
		c.sasl = sasl
		c.tls = t.apiTLS()
		c.clientAuth = kafkaClientAuth(t, authRequired, len(sasl) > 0)
		certs := c.clientAuth == tls.RequireAndVerifyClientCert
		if !configured("kafka-listen") && !configured("listen") && (!authRequired || certs || len(sasl) > 0) {
			c.listen = defaultKafkaListen
		}
		if authRequired && c.listen != "" && !certs && len(sasl) == 0 {
			return c, errors.New("--kafka-listen under --auth required needs TLS with client certificates (--tls-cert, --tls-key and --tls-client-ca, or peer TLS's CA), or SASL (--kafka-sasl-mechanisms)")
		}
		if len(sasl) > 0 && !c.tls && !t.insecurePlaintext {
			for _, f := range []struct{ flag, addr string }{{"--kafka-listen", c.listen}, {"--kafka-advertise", c.advertise}} {
				if f.addr != "" && !isLoopback(f.addr) {
					return c, fmt.Errorf("--kafka-sasl-mechanisms %s on %s %s not on loopback needs TLS (--tls-cert, --tls-key): SASL over plaintext sends passwords and tokens in the clear; --insecure-allow-plaintext serves it all the same (docs/kafka.md)",
						strings.Join(sasl, ","), f.flag, f.addr)
				}
			}
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
		var missing []string
		if !c.tls {
			missing = append(missing, "TLS (--tls-cert, --tls-key)")
		}
		if !authRequired {
			missing = append(missing, "--auth required")
		}
		if len(exposed) > 0 && len(missing) > 0 {
			msg := strings.Join(exposed, ", ") + " not on loopback: the Kafka listener needs " + strings.Join(missing, " and ")
			if !t.insecurePlaintext {
				return c, fmt.Errorf("%s; --insecure-allow-plaintext serves it all the same (docs/kafka.md)", msg)
			}
			c.insecure = msg
		}
		return c, nil
	}
}

// kafkaClientAuth is the Kafka listener's client-certificate policy:
// under --auth required, certificates are required (verified against the
// client CA and the cluster CA, as on the API), when there is a CA to
// verify them, and verified when given with SASL enabled (a SASL client
// has none); otherwise the API's policy (apiClientAuthFor). Under --auth
// required without a CA it is the API's, which kafkaConfig's reader
// refuses without SASL.
func kafkaClientAuth(t tlsConfig, authRequired, sasl bool) tls.ClientAuthType {
	if authRequired && t.apiTLS() && (t.clientCA != "" || t.peerTLS()) {
		if sasl {
			return tls.VerifyClientCertIfGiven
		}
		return tls.RequireAndVerifyClientCert
	}
	if sasl && apiClientAuthFor(t) == tls.RequireAndVerifyClientCert {
		return tls.VerifyClientCertIfGiven
	}
	return apiClientAuthFor(t)
}

// parseMechanisms reads --kafka-sasl-mechanisms: names of
// kafka.Mechanisms, comma-separated, each once.
func parseMechanisms(s string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(s, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch {
		case m == "":
			continue
		case !slices.Contains(kafka.Mechanisms, m):
			return nil, fmt.Errorf("--kafka-sasl-mechanisms: unknown mechanism %q (want %s)", m, strings.Join(kafka.Mechanisms, ", "))
		case slices.Contains(out, m):
			return nil, fmt.Errorf("--kafka-sasl-mechanisms: %s given twice", m)
		}
		out = append(out, m)
	}
	return out, nil
}

// bind binds the Kafka listener, before Raft starts (a port in use fails
// at once), and checks the advertised addresses. It returns a nil
// listener when the Kafka listener is off. The client connection caps
// need no share of their own: the API's listener and this one draw from
// one pool (server.Server.Listener), which stays under the open-file limit
// less the reserve (connCaps).
func (k *kafkaConfig) bind(apiAdvertise string) (net.Listener, error) {
	if k.listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", k.listen)
	if err != nil {
		return nil, fmt.Errorf("kafka listen on %s: %w (--kafka-listen \"\" switches the Kafka listener off)", k.listen, err)
	}
	if k.advertise == "" {
		k.advertise = ln.Addr().String()
	}
	if _, err := kafka.PortOffset(apiAdvertise, k.advertise); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--kafka-advertise: %w", err)
	}
	return ln, nil
}

// newRegistry is the metrics registry the API and the Kafka listener share
// (as server.New would make it).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// startKafka serves the Kafka protocol on ln (nil: off) under srv's
// connection limits, over TLS with the API's certificate when the API has
// one (reloaded with it), and returns the function that stops it. Its
// calls are authorized by the same decision as the API's (the backend's
// ACLs, the same superusers), draw from the API's per-principal quotas,
// and write the same audit log.
func startKafka(k kafkaConfig, ln net.Listener, backend *replication.Backend, srv *server.Server, reg prometheus.Registerer,
	apiAdvertise string, limits limitConfig, tlsc *nodeTLS, authOpts server.AuthOptions, peerTLS *peer.TLS,
	forward *kafkaForwarder, logger *slog.Logger) func() {
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
		// The API's answer budget: answers of both front ends together.
		Answers: srv.AnswerBudget(),
		Auth: kafka.AuthOptions{
			Authorizer:       auth.NewAuthorizer(authOpts.Required, authOpts.Superusers, backend.ACLs),
			Quotas:           srv.QuotaLimiter(),
			Audit:            authOpts.Audit,
			HandshakeTimeout: limits.readHeaderTimeout,
			VerifiedNode:     peerTLS.VerifiedNode,
			SASL:             kafka.SASLOptions{Mechanisms: k.sasl, Credentials: backend},
		},
		// GroupOptions reads 0 as the default; the flag's 0 waits for nothing.
		Groups: kafka.GroupOptions{InitialRebalanceDelay: cmp.Or(k.groupDelay, -1),
			ShareSessionTimeout: k.shareSession, ShareHeartbeatInterval: k.shareHeartbeat},
		Forward:    forward,
		Registerer: reg, Logger: logger,
		// The per-topic series are the API's: one family each, whichever
		// front end the records went through.
		Traffic: srv.TopicTraffic(),
	})
	if err != nil {
		// Only options bind checked can fail here.
		logger.Error("kafka listener not started", "err", err)
		ln.Close()
		return func() {}
	}
	// `logctl group delete` (the backend's DeleteGroup) refuses a group
	// whose Kafka members this node coordinates.
	backend.SetExternalGroupMembers(ks.GroupMembers)
	// The connection caps count sockets, under TLS, as the API's.
	kln := srv.Listener(ln, "kafka")
	if k.tls {
		kln = tls.NewListener(kln, tlsc.api.ServerConfig(k.clientAuth))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ks.Serve(kln); err != nil && !errors.Is(err, kafka.ErrServerClosed) {
			logger.Error("kafka listener stopped", "err", err)
		}
	}()
	if k.insecure != "" {
		logger.Warn("INSECURE: --insecure-allow-plaintext: the Kafka listener is exposed without TLS or without --auth required", "exposed", k.insecure)
	}
	logger.Info("kafka listener started", "listen", ln.Addr().String(), "advertise", k.advertise, "auto_create_topics", k.autoCreate,
		"tls", k.tls, "client_certificates", clientAuthName(k.clientAuth), "auth", authOpts.Required, "sasl", strings.Join(k.sasl, ","))
	return func() {
		if err := ks.Close(); err != nil {
			logger.Warn("kafka shutdown", "err", err)
		}
		<-done
	}
}
