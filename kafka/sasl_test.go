package kafka

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/internal/testcerts"
)

// withSASL enables mechs, with the node's backend as the credentials.
func withSASL(mechs ...string) func(*Options) {
	return func(o *Options) {
		o.Auth.SASL = SASLOptions{Mechanisms: mechs, Credentials: o.Backend.(Credentials)}
	}
}

// setSCRAM stores user's credential for m with password pw.
func (tn *testNode) setSCRAM(user, pw string, m auth.SCRAMMechanism) {
	tn.t.Helper()
	c, err := auth.NewSCRAMCredential(m, user, pw, auth.MinSCRAMIterations, rand.Reader)
	if err != nil {
		tn.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tn.backend.SetSCRAMCredential(ctx, c, "User:admin"); err != nil {
		tn.t.Fatal(err)
	}
}

// newToken stores a token of principal and returns it as a client sends it.
func (tn *testNode) newToken(principal string) string {
	tn.t.Helper()
	tok, err := auth.NewToken(rand.Reader)
	if err != nil {
		tn.t.Fatal(err)
	}
	p, err := auth.ParsePrincipal(principal)
	if err != nil {
		tn.t.Fatal(err)
	}
	v, err := auth.NewVerifier(tok, p, "sasl test", time.Now().UnixMilli(), 0, rand.Reader)
	if err != nil {
		tn.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.backend.CreateToken(ctx, v, "User:admin"); err != nil {
		tn.t.Fatal(err)
	}
	return tok.String()
}

// saslHandshake sends a SaslHandshake v1 for mech and returns its code.
func saslHandshake(c *rawClient, mech string) int16 {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	req.Mechanism = mech
	return c.do(req).(*kmsg.SASLHandshakeResponse).ErrorCode
}

// saslAuthenticate sends one SaslAuthenticate v2.
func saslAuthenticate(c *rawClient, msg []byte) *kmsg.SASLAuthenticateResponse {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(2)
	req.SASLAuthBytes = msg
	return c.do(req).(*kmsg.SASLAuthenticateResponse)
}

// startSASLNode is a node checking ACLs, over TLS without a required
// client certificate, with mechs enabled.
func startSASLNode(t *testing.T, mechs ...string) *secureNode {
	t.Helper()
	return startSecureNodeTLS(t, (*testcerts.CA).OptionalClientConfig, withSASL(mechs...))
}

// TestSASLKgo authenticates kgo with each mechanism (PLAIN with a token
// and with a SCRAM password, SCRAM-SHA-256, SCRAM-SHA-512) over TLS
// without a client certificate; each principal produces and consumes the
// one topic its ACLs allow and is refused another, and each
// authentication has its audit line.
func TestSASLKgo(t *testing.T) {
	sn := startSASLNode(t, Mechanisms...)
	sn.setSCRAM("alice", "alice-pw", auth.SCRAMSHA256)
	sn.setSCRAM("bob", "bob-pw", auth.SCRAMSHA512)
	sn.setSCRAM("dave", "dave-pw", auth.SCRAMSHA256)
	carol := sn.newToken("User:carol")
	cases := []struct {
		user, method string
		mech         sasl.Mechanism
	}{
		{"alice", "sasl_scram_sha_256", scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()},
		{"bob", "sasl_scram_sha_512", scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism()},
		{"carol", "sasl_plain", plain.Auth{User: "carol", Pass: carol}.AsMechanism()},
		{"dave", "sasl_plain", plain.Auth{User: "dave", Pass: "dave-pw"}.AsMechanism()},
	}
	for _, c := range cases {
		sn.createTopic("t-"+c.user, 1, nil)
		sn.grant("User:"+c.user, "t-"+c.user, auth.OpWrite, auth.OpRead, auth.OpDescribe)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tlsc := sn.ca.ClientConfig(tls0)
	for _, c := range cases {
		topic := "t-" + c.user
		cl := newKgo(t, sn.tls, kgo.DialTLSConfig(tlsc), kgo.SASL(c.mech), kgo.RequiredAcks(kgo.AllISRAcks()))
		want := []string{c.user + "-1", c.user + "-2", c.user + "-3"}
		for _, v := range want {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", c.user, err)
			}
		}
		other := "t-alice"
		if c.user == "alice" {
			other = "t-bob"
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: other, Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s: produce to %s: %v; want TOPIC_AUTHORIZATION_FAILED", c.user, other, err)
		}
		consumer := newKgo(t, sn.tls, kgo.DialTLSConfig(tlsc), kgo.SASL(c.mech),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		var got []string
		for len(got) < len(want) {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s: consumed %d of %d", c.user, len(got), len(want))
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s: fetch %s-%d: %v", c.user, topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: consumed %q, want %q", c.user, got, want)
		}
		line := `"procedure":"kafka/SASLAuthenticate","principal":"User:` + c.user + `","auth":"` + c.method + `"`
		if !strings.Contains(sn.audit.String(), line) {
			t.Errorf("%s: no audit line %s in\n%s", c.user, line, sn.audit.String())
		}
	}
}

// tls0 is no client certificate.
var tls0 tls.Certificate

// TestSASLRefusals checks each refusal's Kafka error and audit line: a
// wrong password, an unknown user, a token of another user, a mechanism
// not enabled, a second authentication, and a request before
// authenticating, which closes the connection.
func TestSASLRefusals(t *testing.T) {
	sn := startSASLNode(t, MechPlain, MechSCRAMSHA512)
	sn.setSCRAM("alice", "alice-pw", auth.SCRAMSHA512)
	bobToken := sn.newToken("User:bob")
	tlsc := sn.ca.ClientConfig(tls0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, c := range []struct {
		name string
		mech sasl.Mechanism
	}{
		{"wrong SCRAM password", scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism()},
		{"unknown SCRAM user", scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism()},
		{"wrong PLAIN password", plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()},
		{"token of another user", plain.Auth{User: "alice", Pass: bobToken}.AsMechanism()},
	} {
		cl := newKgo(t, sn.tls, kgo.DialTLSConfig(tlsc), kgo.SASL(c.mech), kgo.RetryTimeout(time.Second))
		err := cl.Ping(ctx)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v; want SASL_AUTHENTICATION_FAILED", c.name, err)
		}
	}
	audit := sn.audit.String()
	for _, want := range []string{`"user":"mallory"`, `"outcome":"sasl_authentication_failed"`, `"mechanism":"PLAIN"`} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit lacks %s:\n%s", want, audit)
		}
	}

	// A mechanism not enabled: the enabled ones are listed, and the
	// connection stays open for another.
	c := dialTLS(t, sn.tls, tlsc)
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	req.Mechanism = MechSCRAMSHA256
	resp := c.do(req).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != errUnsupportedSaslMechanism || !slices.Equal(resp.SupportedMechanisms, []string{MechPlain, MechSCRAMSHA512}) {
		t.Errorf("SCRAM-SHA-256 handshake: %s %q", errorName(resp.ErrorCode), resp.SupportedMechanisms)
	}
	if !strings.Contains(sn.audit.String(), `"outcome":"unsupported_sasl_mechanism"`) {
		t.Errorf("no audit line for the mechanism not enabled")
	}
	// Then PLAIN, then a second authentication.
	if code := saslHandshake(c, MechPlain); code != errNone {
		t.Fatalf("PLAIN handshake: %s", errorName(code))
	}
	if r := saslAuthenticate(c, []byte("\x00alice\x00alice-pw")); r.ErrorCode != errNone {
		t.Fatalf("PLAIN: %s", errorName(r.ErrorCode))
	}
	if r := saslAuthenticate(c, []byte("\x00alice\x00alice-pw")); r.ErrorCode != errIllegalSaslState {
		t.Errorf("second SaslAuthenticate: %s; want ILLEGAL_SASL_STATE", errorName(r.ErrorCode))
	}
	c.expectClosed()
	c = dialTLS(t, sn.tls, tlsc)
	saslHandshake(c, MechPlain)
	saslAuthenticate(c, []byte("\x00alice\x00alice-pw"))
	if code := saslHandshake(c, MechPlain); code != errIllegalSaslState {
		t.Errorf("second SaslHandshake: %s; want ILLEGAL_SASL_STATE", errorName(code))
	}
	c.expectClosed()
	if !strings.Contains(sn.audit.String(), `"outcome":"illegal_sasl_state"`) {
		t.Errorf("no audit line for the second authentication")
	}

	// Under --auth required, nothing but the SASL requests before
	// authenticating.
	c = dialTLS(t, sn.tls, tlsc)
	c.send(kmsg.NewPtrMetadataRequest())
	c.expectClosed()
	if n := testutilCount(t, sn, "sasl_required"); n != 1 {
		t.Errorf("sasl_required counted %v times, want 1", n)
	}
	// Nor a request above 512 KiB, even a SASL one.
	c = dialTLS(t, sn.tls, tlsc)
	saslHandshake(c, MechPlain)
	big := &kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: make([]byte, 600<<10)}
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	c.conn.Write(c.f.AppendRequest(nil, big, 99)) // the server may close before all is sent
	c.expectClosed()
	if n := testutilCount(t, sn, "sasl_size"); n != 1 {
		t.Errorf("sasl_size counted %v times, want 1", n)
	}
}

// TestSCRAMAdminKadm manages credentials with kadm (KIP-554): an upsert
// kadm salts, a describe, authentication with it, refusals per user, a
// delete; a principal without ALTER on the cluster is refused.
func TestSCRAMAdminKadm(t *testing.T) {
	sn := startSASLNode(t, MechSCRAMSHA256, MechSCRAMSHA512)
	sn.setSCRAM("admin", "admin-pw", auth.SCRAMSHA512)
	sn.setSCRAM("eve", "eve-pw", auth.SCRAMSHA512)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tlsc := sn.ca.ClientConfig(tls0)
	admCl := newKgo(t, sn.tls, kgo.DialTLSConfig(tlsc), kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism()))
	adm := kadm.NewClient(admCl)

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "frank", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "frank-pw"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := altered["frank"].Err; err != nil {
		t.Errorf("frank: %v", err)
	}
	// kadm refuses these itself; the broker must too.
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []struct {
		name  string
		mech  int8
		iters int32
	}{{"gina", 2, 1000}, {"hal", 3, 4096}, {"ivy", 1, 4096}, {"ivy", 1, 4096}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations = u.name, u.mech, u.iters
		up.Salt, up.SaltedPassword = []byte("salt"), make([]byte, 32)
		req.Upsertions = append(req.Upsertions, up)
	}
	resp, err := req.RequestWith(ctx, admCl)
	if err != nil {
		t.Fatal(err)
	}
	wantCodes := map[string]int16{"gina": errUnacceptableCredential, "hal": errUnsupportedSaslMechanism, "ivy": errDuplicateResource}
	for _, r := range resp.Results {
		if r.ErrorCode != wantCodes[r.User] {
			t.Errorf("upsert %s: %s; want %s", r.User, errorName(r.ErrorCode), errorName(wantCodes[r.User]))
		}
	}
	if len(resp.Results) != len(wantCodes) || len(sn.backend.SCRAMCredentials()) != 3 {
		t.Errorf("%d results, %d credentials stored; want %d, 3", len(resp.Results), len(sn.backend.SCRAMCredentials()), len(wantCodes))
	}
	described, err := adm.DescribeUserSCRAMs(ctx, "frank", "gina")
	if err != nil {
		t.Fatal(err)
	}
	if f := described["frank"]; f.Err != nil || len(f.CredInfos) != 1 || f.CredInfos[0].Mechanism != kadm.ScramSha256 || f.CredInfos[0].Iterations != 8192 {
		t.Errorf("frank: %+v", f)
	}
	if g := described["gina"]; !errors.Is(g.Err, kerr.ResourceNotFound) {
		t.Errorf("gina: %+v; want RESOURCE_NOT_FOUND", g)
	}
	frank := newKgo(t, sn.tls, kgo.DialTLSConfig(tlsc), kgo.SASL(scram.Auth{User: "frank", Pass: "frank-pw"}.AsSha256Mechanism()))
	if err := frank.Ping(ctx); err != nil {
		t.Fatalf("frank authenticates: %v", err)
	}

	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "frank", Mechanism: kadm.ScramSha256}, {User: "gina", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := altered["frank"].Err; err != nil {
		t.Errorf("delete frank: %v", err)
	}
	if err := altered["gina"].Err; !errors.Is(err, kerr.ResourceNotFound) {
		t.Errorf("delete gina: %v; want RESOURCE_NOT_FOUND", err)
	}
	if _, ok := sn.backend.SCRAMCredential("frank", auth.SCRAMSHA256); ok {
		t.Error("frank's credential is still stored")
	}
	if !strings.Contains(sn.audit.String(), `"procedure":"kafka/AlterUserSCRAMCredentials","principal":"User:admin"`) {
		t.Errorf("no audit line for the change:\n%s", sn.audit.String())
	}

	eve := kadm.NewClient(newKgo(t, sn.tls, kgo.DialTLSConfig(tlsc), kgo.SASL(scram.Auth{User: "eve", Pass: "eve-pw"}.AsSha512Mechanism())))
	// kadm reports an authorization error of any user as the call's.
	altered, err = eve.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "eve", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "x"}})
	if err == nil {
		err = altered["eve"].Err
	}
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("eve alters: %v; want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if _, err := eve.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("eve describes: %v; want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

// rawToken writes a raw SASL token (after a SaslHandshake v0) and reads
// the raw answer; an error when the server closed the connection.
func (c *rawClient) rawToken(tok []byte) ([]byte, error) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...)); err != nil {
		return nil, err
	}
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, err
	}
	out := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.br, out)
	return out, err
}

// TestSASLHandshakeV0Raw: after a SaslHandshake v0 the exchange is raw
// frames without a Kafka header: PLAIN is one token answered by an empty
// frame, SCRAM two (franz-go's SCRAM client makes them), and then Kafka
// requests go on, as the principal authenticated; a wrong password closes
// the connection without an answer.
func TestSASLHandshakeV0Raw(t *testing.T) {
	sn := startSASLNode(t, Mechanisms...)
	sn.setSCRAM("alice", "alice-pw", auth.SCRAMSHA256)
	sn.createTopic("raw", 1, nil)
	sn.grant("User:alice", "raw", auth.OpDescribe)
	tlsc := sn.ca.ClientConfig(tls0)
	handshakeV0 := func(c *rawClient, mech string) {
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.SetVersion(0)
		req.Mechanism = mech
		if code := c.do(req).(*kmsg.SASLHandshakeResponse).ErrorCode; code != errNone {
			t.Fatalf("%s handshake v0: %s", mech, errorName(code))
		}
	}
	described := func(c *rawClient) bool {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(9)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("raw")
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.MetadataResponse)
		return len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == errNone
	}

	c := dialTLS(t, sn.tls, tlsc)
	handshakeV0(c, MechPlain)
	if out, err := c.rawToken([]byte("\x00alice\x00alice-pw")); err != nil || len(out) != 0 {
		t.Fatalf("raw PLAIN: %q, %v; want an empty frame", out, err)
	}
	if !described(c) {
		t.Fatal("after raw PLAIN, alice may not describe raw")
	}

	c = dialTLS(t, sn.tls, tlsc)
	handshakeV0(c, MechSCRAMSHA256)
	ctx := context.Background()
	sess, first, err := scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism().Authenticate(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for tok := first; ; {
		challenge, err := c.rawToken(tok)
		if err != nil {
			t.Fatalf("raw SCRAM: %v", err)
		}
		done, next, err := sess.Challenge(challenge)
		if err != nil {
			t.Fatalf("raw SCRAM: the server's message: %v", err)
		}
		if done {
			break
		}
		tok = next
	}
	if !described(c) {
		t.Fatal("after raw SCRAM, alice may not describe raw")
	}

	c = dialTLS(t, sn.tls, tlsc)
	handshakeV0(c, MechPlain)
	if out, err := c.rawToken([]byte("\x00alice\x00nope")); err == nil {
		t.Fatalf("raw PLAIN with a wrong password answered %q", out)
	}
}
