package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/syncbuf"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/internal/quota"
	"github.com/logd-dev/logd/internal/testcerts"
)

// TestEveryServedKeyHasAnAuthzRow: every advertised key has a row in the
// permission table, so a key added to the table of versions without one
// fails here rather than being refused (or, worse, allowed) by accident.
func TestEveryServedKeyHasAnAuthzRow(t *testing.T) {
	for _, r := range advertised {
		if _, ok := authzTable[r.key]; !ok {
			t.Errorf("%s is advertised without a row in authzTable (auth.go)", apiName(r.key))
		}
	}
}

// secureNode is a node whose Kafka listener serves TLS with client
// certificates of ca required, and checks permissions (--auth required)
// with admin as superuser; the audit lines go to audit.
type secureNode struct {
	*testNode
	ca    *testcerts.CA
	tls   string // the TLS listener's address, which Metadata advertises
	audit *syncBuffer
}

// syncBuffer is a bytes.Buffer for a logger and a test at once.
type syncBuffer = syncbuf.Buffer

func startSecureNode(t *testing.T, opts ...func(*Options)) *secureNode {
	t.Helper()
	return startSecureNodeTLS(t, (*testcerts.CA).ServerConfig, opts...)
}

// startSecureNodeTLS is startSecureNode with the listener's TLS
// configuration made by serverConfig from the CA and the node's
// certificate.
func startSecureNodeTLS(t *testing.T, serverConfig func(*testcerts.CA, tls.Certificate) *tls.Config, opts ...func(*Options)) *secureNode {
	t.Helper()
	ca := testcerts.NewCA(t, "cluster")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sn := &secureNode{ca: ca, tls: ln.Addr().String(), audit: &syncBuffer{}}
	tn := startNode(t, append([]func(*Options){func(o *Options) {
		o.Advertise = sn.tls
		b := o.Backend.(interface{ ACLs() *auth.Set })
		o.Auth.Authorizer = auth.NewAuthorizer(true, []auth.Principal{auth.User("admin")}, b.ACLs)
		o.Auth.Audit = slog.New(slog.NewJSONHandler(sn.audit, nil))
	}}, opts...)...)
	sn.testNode = tn
	done := make(chan error, 1)
	go func() { done <- tn.srv.Serve(tls.NewListener(ln, serverConfig(ca, ca.Node(t, "n1")))) }()
	t.Cleanup(func() {
		tn.srv.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve tls: %v", err)
		}
	})
	return sn
}

// grant adds ACLs allowing principal ops on topic.
func (sn *secureNode) grant(principal, topic string, ops ...auth.Operation) {
	sn.t.Helper()
	var acls []auth.ACL
	for _, op := range ops {
		acls = append(acls, auth.ACL{Principal: principal, Resource: auth.ResourceTopic, Pattern: auth.PatternLiteral, Name: topic, Operation: op, Effect: auth.Allow})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sn.backend.CreateACLs(ctx, acls); err != nil {
		sn.t.Fatal(err)
	}
}

// dialAs opens a raw connection as user name (a client certificate of
// the node's CA).
func (sn *secureNode) dialAs(name string) *rawClient {
	sn.t.Helper()
	return dialTLS(sn.t, sn.tls, sn.ca.ClientConfig(sn.ca.Client(sn.t, name)))
}

func dialTLS(t testing.TB, addr string, cfg *tls.Config) *rawClient {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, br: bufio.NewReader(c), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("logd-test"))}
}

// TestAuthzPerRequest walks the handlers with a principal that holds some
// permissions and not others: each refusal is the Kafka code for the
// resource, per topic (the allowed topics of the same request go on), and
// a refused write changes nothing. The admin actions, allowed or not,
// have their audit lines.
func TestAuthzPerRequest(t *testing.T) {
	sn := startSecureNode(t)
	sn.createTopic("open", 1, nil)
	sn.createTopic("secret", 1, nil)
	sn.createTopic("readonly", 1, nil)
	sn.grant("User:alice", "open", auth.OpWrite, auth.OpRead)
	sn.grant("User:alice", "readonly", auth.OpRead)
	sn.grant("User:alice", "made", auth.OpCreate)
	c := sn.dialAs("alice")

	// Produce to open and secret at once: open is written, secret not.
	req := produceReq(9, -1, "open", 0, records(t, "a"))
	req.Topics = append(req.Topics, produceReq(9, -1, "secret", 0, records(t, "s")).Topics[0])
	resp := c.do(req).(*kmsg.ProduceResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["open"] != 0 || codes["secret"] != errTopicAuthorizationFailed {
		t.Fatalf("produce codes %v; want open 0, secret TOPIC_AUTHORIZATION_FAILED", codes)
	}
	if off, _ := sn.backend.Offsets("secret", 0); off.End != 0 {
		t.Fatalf("secret has %d records after a refused produce", off.End)
	}
	if code, _ := produceCode(t, c.do(produceReq(9, -1, "readonly", 0, records(t, "r")))); code != errTopicAuthorizationFailed {
		t.Errorf("produce to a topic alice may only read: code %d", code)
	}

	// Fetch and ListOffsets.
	if p := fetchPart(t, c.do(fetchReq(12, "secret", 0, 0, 0, 1, 1<<20))); p.ErrorCode != errTopicAuthorizationFailed || len(p.RecordBatches) != 0 {
		t.Errorf("fetch of secret: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if p := fetchPart(t, c.do(fetchReq(12, "open", 0, 0, 0, 1, 1<<20))); p.ErrorCode != 0 || len(batchValues(t, p.RecordBatches, 0)) != 1 {
		t.Errorf("fetch of open: code %d", p.ErrorCode)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(7)
	for _, topic := range []string{"open", "secret"} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
	}
	if r := c.do(lo).(*kmsg.ListOffsetsResponse); r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[1].Partitions[0].ErrorCode != errTopicAuthorizationFailed {
		t.Errorf("list offsets codes %d, %d", r.Topics[0].Partitions[0].ErrorCode, r.Topics[1].Partitions[0].ErrorCode)
	}

	// Metadata: every topic lists those alice may describe; named, secret
	// (and a topic that does not exist) is refused, the others described.
	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(12)
	var listed []string
	for _, mt := range c.do(all).(*kmsg.MetadataResponse).Topics {
		listed = append(listed, *mt.Topic)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, []string{"open", "readonly"}) {
		t.Errorf("metadata of every topic lists %q; want open and readonly", listed)
	}
	named := kmsg.NewPtrMetadataRequest()
	named.SetVersion(12)
	for _, n := range []string{"open", "secret", "nowhere"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		named.Topics = append(named.Topics, mt)
	}
	mr := c.do(named).(*kmsg.MetadataResponse)
	if mr.Topics[0].ErrorCode != 0 || mr.Topics[1].ErrorCode != errTopicAuthorizationFailed || mr.Topics[2].ErrorCode != errTopicAuthorizationFailed {
		t.Errorf("metadata of open, secret, nowhere: codes %d %d %d", mr.Topics[0].ErrorCode, mr.Topics[1].ErrorCode, mr.Topics[2].ErrorCode)
	}
	byID := kmsg.NewPtrMetadataRequest()
	byID.SetVersion(12)
	secret, _ := sn.backend.Topic("secret")
	mt := kmsg.NewMetadataRequestTopic()
	mt.TopicID = topicID(secret)
	byID.Topics = append(byID.Topics, mt)
	if r := c.do(byID).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != errTopicAuthorizationFailed || r.Topics[0].Topic != nil {
		t.Errorf("metadata of secret by id: code %d, name %v; want TOPIC_AUTHORIZATION_FAILED without a name", r.Topics[0].ErrorCode, r.Topics[0].Topic)
	}

	// Administration: alice may create "made" only; she may not delete
	// or alter anything, nor describe the broker's configs.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	for _, n := range []string{"made", "forbidden"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, -1
		ct.Topics = append(ct.Topics, rt)
	}
	if r := c.do(ct).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 || r.Topics[1].ErrorCode != errTopicAuthorizationFailed {
		t.Errorf("create made, forbidden: codes %d %d", r.Topics[0].ErrorCode, r.Topics[1].ErrorCode)
	}
	if _, err := sn.backend.Topic("forbidden"); err == nil {
		t.Error("a refused CreateTopics created its topic")
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("open")
	dt.Topics = append(dt.Topics, dtt)
	if r := c.do(dt).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != errTopicAuthorizationFailed {
		t.Errorf("delete open: code %d", r.Topics[0].ErrorCode)
	}
	if _, err := sn.backend.Topic("open"); err != nil {
		t.Error("a refused DeleteTopics deleted its topic")
	}
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, typ := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker} {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, "open"
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("1000")
		rr.Configs = append(rr.Configs, cfg)
		ia.Resources = append(ia.Resources, rr)
	}
	if r := c.do(ia).(*kmsg.IncrementalAlterConfigsResponse); r.Resources[0].ErrorCode != errTopicAuthorizationFailed || r.Resources[1].ErrorCode != errClusterAuthorizationFailed {
		t.Errorf("alter configs of topic and broker: codes %d %d", r.Resources[0].ErrorCode, r.Resources[1].ErrorCode)
	}
	if info, _ := sn.backend.Topic("open"); info.Config["retention.ms"] == "1000" {
		t.Error("a refused IncrementalAlterConfigs altered its topic")
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "open"}, {kmsg.ConfigResourceTypeTopic, "secret"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		dc.Resources = append(dc.Resources, rr)
	}
	if r := c.do(dc).(*kmsg.DescribeConfigsResponse); r.Resources[0].ErrorCode != 0 || r.Resources[1].ErrorCode != errTopicAuthorizationFailed || r.Resources[2].ErrorCode != errClusterAuthorizationFailed {
		t.Errorf("describe configs of open, secret, the broker: codes %d %d %d", r.Resources[0].ErrorCode, r.Resources[1].ErrorCode, r.Resources[2].ErrorCode)
	}

	// The audit log has a line per admin resource, with the principal and
	// the outcome; the superuser's actions pass.
	admin := sn.dialAs("admin")
	if r := admin.do(dt).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Errorf("admin's delete of open: code %d", r.Topics[0].ErrorCode)
	}
	log := sn.audit.String()
	for _, want := range []string{
		`"procedure":"kafka/CreateTopics","principal":"User:alice","auth":"certificate"`,
		`"request":{"topic":"made","partitions":1,"config":""},"outcome":"ok"`,
		`"request":{"topic":"forbidden","partitions":1,"config":""},"outcome":"topic_authorization_failed"`,
		`"procedure":"kafka/DeleteTopics","principal":"User:alice"`,
		`"procedure":"kafka/IncrementalAlterConfigs","principal":"User:alice"`,
		`"outcome":"cluster_authorization_failed"`,
		`"procedure":"kafka/DeleteTopics","principal":"User:admin","auth":"certificate","remote"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
}

// TestKgoOverTLS: kgo with a client certificate produces to and consumes
// from a topic its ACLs allow; a topic it may describe but not write is
// refused with TOPIC_AUTHORIZATION_FAILED and nothing is written; a topic
// it may not describe is not listed. Clients without a certificate, of
// another CA, or without TLS are refused.
func TestKgoOverTLS(t *testing.T) {
	sn := startSecureNode(t)
	sn.createTopic("orders", 2, nil)
	sn.createTopic("audit", 1, nil)
	sn.createTopic("hidden", 1, nil)
	sn.grant("User:alice", "orders", auth.OpWrite, auth.OpRead)
	sn.grant("User:alice", "audit", auth.OpDescribe)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := sn.ca.ClientConfig(sn.ca.Client(t, "alice"))

	cl := newKgo(t, sn.tls, kgo.DialTLSConfig(alice), kgo.RequiredAcks(kgo.AllISRAcks()))
	var want []string
	for i := range 20 {
		v := "order-" + string(rune('a'+i))
		want = append(want, v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce to orders: %v", err)
		}
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "audit", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to audit: %v; want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if off, _ := sn.backend.Offsets("audit", 0); off.End != 0 {
		t.Fatalf("audit has %d records after a refused produce", off.End)
	}

	consumer := newKgo(t, sn.tls, kgo.DialTLSConfig(alice), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", len(got), len(want))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %q; want %q", got, want)
	}

	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, mt := range resp.Topics {
		listed = append(listed, *mt.Topic)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, []string{"audit", "orders"}) {
		t.Errorf("kgo's metadata lists %q; want audit and orders (not hidden)", listed)
	}

	// Refused clients: no certificate, another CA's, no TLS.
	other := testcerts.NewCA(t, "other")
	noCert := sn.ca.ClientConfig(tls.Certificate{})
	stranger := other.ClientConfig(other.Client(t, "alice"))
	stranger.RootCAs = sn.ca.Pool // it trusts the node: the refusal is the node's
	// The node has no cluster CA to vouch for nodes (AuthOptions.VerifiedNode
	// unset): a certificate claiming a node names nobody.
	posing := sn.ca.ClientConfig(sn.ca.Node(t, "n1"))
	for name, opts := range map[string][]kgo.Opt{
		"no certificate":            {kgo.DialTLSConfig(noCert)},
		"another CA":                {kgo.DialTLSConfig(stranger)},
		"a node nobody vouches for": {kgo.DialTLSConfig(posing)},
	} {
		cl := newKgo(t, sn.tls, append(opts, kgo.RetryTimeout(time.Second))...)
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		err := cl.Ping(pctx)
		pcancel()
		if err == nil {
			t.Errorf("%s: ping succeeded", name)
		}
	}
	plain := dial(t, sn.addr) // the node's plaintext listener
	plain.send(kmsg.NewPtrApiVersionsRequest())
	plain.expectClosed()
	// A client may see its refusal before the node's goroutine counts it.
	waitFor(t, 10*time.Second, "3 refused connections counted", func() bool {
		return testutilCount(t, sn, "no_certificate")+testutilCount(t, sn, "handshake") >= 3
	})
	waitFor(t, 10*time.Second, "a connection refused as a posing node counted", func() bool {
		return testutilCount(t, sn, "not_node") >= 1
	})
}

// testutilCount reads logd_kafka_connections_refused_total{reason}.
func testutilCount(t *testing.T, sn *secureNode, reason string) float64 {
	t.Helper()
	mfs, err := sn.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "logd_kafka_connections_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestQuotas: the byte-rate quotas the Connect API applies hold on the
// Kafka listener too, from the same buckets: a produce that leaves its
// principal in debt is answered with the throttle; the next is refused
// with NOT_ENOUGH_REPLICAS (which every client retries), the throttle,
// and nothing written; a fetch in debt is answered empty, with the
// throttle, as Kafka throttles; once the clock has paid the debt back,
// both pass again.
func TestQuotas(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	limiter := quota.New(quota.Rates{ProduceBytesPerSec: 100, FetchBytesPerSec: 100}, clock, nil)
	tn := startNode(t, func(o *Options) { o.Auth.Quotas = limiter })
	tn.createTopic("q", 1, nil)
	c := dial(t, tn.addr)

	big := records(t, strings.Repeat("x", 300)) // about 3 s of the rate
	r := c.do(produceReq(9, -1, "q", 0, big)).(*kmsg.ProduceResponse)
	if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 || r.ThrottleMillis < 2000 {
		t.Fatalf("first produce: code %d, throttle %d ms; want 0, about 3 s", code, r.ThrottleMillis)
	}
	r = c.do(produceReq(9, -1, "q", 0, records(t, "y"))).(*kmsg.ProduceResponse)
	if code := r.Topics[0].Partitions[0].ErrorCode; code != errNotEnoughReplicas || r.ThrottleMillis < 2000 {
		t.Fatalf("produce in debt: code %d, throttle %d ms; want NOT_ENOUGH_REPLICAS and the debt", code, r.ThrottleMillis)
	}
	if off, _ := tn.backend.Offsets("q", 0); off.End != 1 {
		t.Fatalf("%d records; a refused produce wrote", off.End)
	}

	f := c.do(fetchReq(12, "q", 0, 0, 0, 1, 1<<20)).(*kmsg.FetchResponse)
	if len(f.Topics) != 1 || f.ThrottleMillis < 2000 {
		t.Fatalf("first fetch: %d topics, throttle %d ms; want the batch and a throttle", len(f.Topics), f.ThrottleMillis)
	}
	f = c.do(fetchReq(12, "q", 0, 0, 0, 1, 1<<20)).(*kmsg.FetchResponse)
	if len(f.Topics) != 0 || f.ThrottleMillis < 2000 {
		t.Fatalf("fetch in debt: %d topics, throttle %d ms; want an empty answer with the throttle", len(f.Topics), f.ThrottleMillis)
	}

	advance(time.Minute)
	if code, _ := produceCode(t, c.do(produceReq(9, -1, "q", 0, records(t, "z")))); code != 0 {
		t.Errorf("produce after the debt: code %d", code)
	}
	if p := fetchPart(t, c.do(fetchReq(12, "q", 0, 0, 0, 1, 1<<20))); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("fetch after the debt: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}
