package main

import (
	"crypto/tls"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKafkaFlags: the Kafka listener is on by default only on the embedded
// default (no --listen, no LOGD_LISTEN), and wherever --kafka-listen (or
// LOGD_KAFKA_LISTEN) says; "" switches it off. It serves TLS when the API
// does; under --auth required it needs client certificates (on by default
// only with them, refused when asked for without), and off loopback TLS
// and --auth required, unless --insecure-allow-plaintext. With
// --kafka-sasl-mechanisms it is on under --auth required without client
// certificates (verified when given), and SASL off loopback needs TLS.
func TestKafkaFlags(t *testing.T) {
	apiTLS := []string{"--tls-cert", "n1.crt", "--tls-key", "n1.key"}
	mTLS := append([]string{"--tls-client-ca", "ca.crt"}, apiTLS...)
	for _, tc := range []struct {
		name       string
		args       []string
		env        map[string]string
		listen     string
		auto       bool
		tls        bool
		clientAuth tls.ClientAuthType
		sasl       []string
		err        bool
		// errHas, if set, is in the error.
		errHas string
	}{
		{name: "embedded default", listen: defaultKafkaListen},
		{name: "--listen given", args: []string{"--listen", "127.0.0.1:7000"}},
		{name: "LOGD_LISTEN given", env: map[string]string{"LOGD_LISTEN": "127.0.0.1:7000"}},
		{name: "--kafka-listen", args: []string{"--listen", "127.0.0.1:7000", "--kafka-listen", "127.0.0.1:9000"}, listen: "127.0.0.1:9000"},
		{name: "LOGD_KAFKA_LISTEN", args: []string{"--listen", "127.0.0.1:7000"}, env: map[string]string{"LOGD_KAFKA_LISTEN": "127.0.0.1:9001"}, listen: "127.0.0.1:9001"},
		{name: "switched off", args: []string{"--kafka-listen", ""}},
		{name: "auto-create", args: []string{"--kafka-auto-create-topics"}, listen: defaultKafkaListen, auto: true},
		{name: "auto-create env", env: map[string]string{"LOGD_KAFKA_AUTO_CREATE_TOPICS": "true"}, listen: defaultKafkaListen, auto: true},
		{name: "bad auto-create", args: []string{"--kafka-auto-create-topics=maybe"}, err: true},
		{name: "bad auto-create env", env: map[string]string{"LOGD_KAFKA_AUTO_CREATE_TOPICS": "maybe"}, err: true},
		{name: "advertise without listener", args: []string{"--kafka-listen", "", "--kafka-advertise", "h:1"}, err: true},
		{name: "auth required without TLS: off by default", args: []string{"--auth", "required"}},
		{name: "auth required without TLS: refused", args: []string{"--auth", "required", "--kafka-listen", "127.0.0.1:9000"}, err: true},
		{name: "auth required, TLS without a CA: off by default", args: append([]string{"--auth", "required"}, apiTLS...), tls: true},
		{name: "auth required, TLS without a CA: refused", args: append([]string{"--auth", "required", "--kafka-listen", "127.0.0.1:9000"}, apiTLS...), err: true},
		{name: "auth required with client certificates: on by default", args: append([]string{"--auth", "required"}, mTLS...),
			listen: defaultKafkaListen, tls: true, clientAuth: tls.RequireAndVerifyClientCert},
		{name: "auth required with the cluster CA: certificates required", args: append([]string{"--auth", "required", "--peer-tls-ca", "ca.crt"}, apiTLS...),
			listen: defaultKafkaListen, tls: true, clientAuth: tls.RequireAndVerifyClientCert},
		{name: "auth none with TLS: the API's policy", args: mTLS, listen: defaultKafkaListen, tls: true, clientAuth: tls.RequireAndVerifyClientCert},
		{name: "auth none with TLS, no CA", args: apiTLS, listen: defaultKafkaListen, tls: true, clientAuth: tls.NoClientCert},
		{name: "not on loopback", args: []string{"--kafka-listen", "0.0.0.0:9092"}, err: true},
		{name: "advertised off loopback", args: []string{"--kafka-listen", "127.0.0.1:9092", "--kafka-advertise", "kafka.example:9092"}, err: true},
		{name: "not on loopback, insecure", args: []string{"--kafka-listen", ":9092", "--insecure-allow-plaintext"}, listen: ":9092"},
		{name: "not on loopback with TLS but auth none", args: append([]string{"--kafka-listen", ":9092"}, mTLS...), err: true},
		{name: "not on loopback with TLS and auth required", args: append([]string{"--kafka-listen", ":9092", "--auth", "required"}, mTLS...),
			listen: ":9092", tls: true, clientAuth: tls.RequireAndVerifyClientCert},
		{name: "SASL under auth required with client certificates: verified if given", args: append([]string{"--auth", "required", "--kafka-sasl-mechanisms", "SCRAM-SHA-512,PLAIN"}, mTLS...),
			listen: defaultKafkaListen, tls: true, clientAuth: tls.VerifyClientCertIfGiven, sasl: []string{"SCRAM-SHA-512", "PLAIN"}},
		{name: "SASL under auth required without a CA: on", args: append([]string{"--auth", "required", "--kafka-sasl-mechanisms", "scram-sha-256"}, apiTLS...),
			listen: defaultKafkaListen, tls: true, clientAuth: tls.NoClientCert, sasl: []string{"SCRAM-SHA-256"}},
		{name: "SASL env", env: map[string]string{"LOGD_KAFKA_SASL_MECHANISMS": "PLAIN"}, listen: defaultKafkaListen, sasl: []string{"PLAIN"}},
		{name: "SASL plaintext on loopback", args: []string{"--kafka-sasl-mechanisms", "PLAIN", "--kafka-listen", "127.0.0.1:9092"},
			listen: "127.0.0.1:9092", sasl: []string{"PLAIN"}},
		{name: "SASL plaintext off loopback: refused", args: []string{"--kafka-sasl-mechanisms", "PLAIN", "--kafka-listen", ":9092", "--auth", "required"},
			err: true, errHas: "SASL over plaintext sends passwords and tokens in the clear"},
		{name: "SASL plaintext advertised off loopback: refused", args: []string{"--kafka-sasl-mechanisms", "SCRAM-SHA-256", "--kafka-listen", "127.0.0.1:9092", "--kafka-advertise", "kafka.example:9092"},
			err: true, errHas: "--kafka-advertise kafka.example:9092 not on loopback needs TLS"},
		{name: "SASL plaintext off loopback, insecure", args: []string{"--kafka-sasl-mechanisms", "PLAIN", "--kafka-listen", ":9092", "--insecure-allow-plaintext"},
			listen: ":9092", sasl: []string{"PLAIN"}},
		{name: "SASL unknown mechanism", args: []string{"--kafka-sasl-mechanisms", "GSSAPI"}, err: true},
		{name: "SASL mechanism twice", args: []string{"--kafka-sasl-mechanisms", "PLAIN,plain"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want one: %v", err, tc.err)
			}
			if err != nil && !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("error %v, want one saying %q", err, tc.errHas)
			}
			if err == nil && (c.kafka.listen != tc.listen || c.kafka.autoCreate != tc.auto || c.kafka.tls != tc.tls || c.kafka.clientAuth != tc.clientAuth ||
				!slices.Equal(c.kafka.sasl, tc.sasl)) {
				t.Errorf("listen %q auto-create %v tls %v client certificates %s; want %q %v %v %s", c.kafka.listen, c.kafka.autoCreate, c.kafka.tls,
					clientAuthName(c.kafka.clientAuth), tc.listen, tc.auto, tc.tls, clientAuthName(tc.clientAuth))
			}
		})
	}
}

// TestKafkaGroupDelayFlag: --kafka-group-initial-rebalance-delay (or its
// variable) defaults to Kafka's 3 s; 0 waits for nothing; a negative, huge
// or malformed one stops the node.
func TestKafkaGroupDelayFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want time.Duration
		err  bool
	}{
		{name: "default", want: 3 * time.Second},
		{name: "flag", args: []string{"--kafka-group-initial-rebalance-delay", "100ms"}, want: 100 * time.Millisecond},
		{name: "env", env: map[string]string{"LOGD_KAFKA_GROUP_INITIAL_REBALANCE_DELAY": "1s"}, want: time.Second},
		{name: "zero", args: []string{"--kafka-group-initial-rebalance-delay", "0"}},
		{name: "negative", args: []string{"--kafka-group-initial-rebalance-delay", "-1s"}, err: true},
		{name: "too long", args: []string{"--kafka-group-initial-rebalance-delay", "1h"}, err: true},
		{name: "malformed", args: []string{"--kafka-group-initial-rebalance-delay", "3"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want one: %v", err, tc.err)
			}
			if err == nil && c.kafka.groupDelay != tc.want {
				t.Errorf("delay %s, want %s", c.kafka.groupDelay, tc.want)
			}
		})
	}
}

// TestKafkaShareSessionFlags: --kafka-share-session-timeout and
// --kafka-share-heartbeat-interval (or their variables) default to Kafka's
// 45 s and 5 s; the interval must stay below the timeout.
func TestKafkaShareSessionFlags(t *testing.T) {
	for _, tc := range []struct {
		name               string
		args               []string
		env                map[string]string
		session, heartbeat time.Duration
		err                bool
	}{
		{name: "default", session: 45 * time.Second, heartbeat: 5 * time.Second},
		{name: "flags", args: []string{"--kafka-share-session-timeout", "3s", "--kafka-share-heartbeat-interval", "500ms"}, session: 3 * time.Second, heartbeat: 500 * time.Millisecond},
		{name: "env", env: map[string]string{"LOGD_KAFKA_SHARE_SESSION_TIMEOUT": "1m", "LOGD_KAFKA_SHARE_HEARTBEAT_INTERVAL": "10s"}, session: time.Minute, heartbeat: 10 * time.Second},
		{name: "timeout below the default interval", args: []string{"--kafka-share-session-timeout", "3s"}, err: true},
		{name: "interval equal to the timeout", args: []string{"--kafka-share-session-timeout", "5s"}, err: true},
		{name: "timeout too short", args: []string{"--kafka-share-session-timeout", "500ms", "--kafka-share-heartbeat-interval", "100ms"}, err: true},
		{name: "timeout too long", args: []string{"--kafka-share-session-timeout", "2h"}, err: true},
		{name: "interval too short", args: []string{"--kafka-share-heartbeat-interval", "10ms"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want one: %v", err, tc.err)
			}
			if err == nil && (c.kafka.shareSession != tc.session || c.kafka.shareHeartbeat != tc.heartbeat) {
				t.Errorf("session %s, heartbeat %s; want %s, %s", c.kafka.shareSession, c.kafka.shareHeartbeat, tc.session, tc.heartbeat)
			}
		})
	}
}

// TestKafkaBind: the listener binds before the node starts and checks its
// advertised address. (The connection caps are shared with the API's
// listener: server's TestListenersShareOnePool.)
func TestKafkaBind(t *testing.T) {
	k := kafkaConfig{listen: "127.0.0.1:0"}
	ln, err := k.bind("127.0.0.1:7070")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if k.advertise != ln.Addr().String() {
		t.Errorf("advertise %q (bound %s)", k.advertise, ln.Addr())
	}
	// The port is taken now.
	if _, err := (&kafkaConfig{listen: ln.Addr().String()}).bind("127.0.0.1:7070"); err == nil {
		t.Error("bind to a port in use: no error")
	}
	if _, err := (&kafkaConfig{listen: "127.0.0.1:0", advertise: "no-port"}).bind("127.0.0.1:7070"); err == nil {
		t.Error("advertised address without a port: no error")
	}
	off := kafkaConfig{}
	if ln, err := off.bind("127.0.0.1:7070"); ln != nil || err != nil {
		t.Errorf("off: %v %v", ln, err)
	}
}
