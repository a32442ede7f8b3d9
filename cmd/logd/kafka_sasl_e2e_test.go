package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// kcatSASL is kcat's configuration for SASL_SSL with mech, trusting dir's
// CA and presenting no client certificate.
func kcatSASL(dir, mech, user, password string) []string {
	return []string{"-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + filepath.Join(dir, "ca.crt"),
		"-X", "sasl.mechanisms=" + mech, "-X", "sasl.username=" + user, "-X", "sasl.password=" + password}
}

// TestKafkaKcatSASL runs kcat (librdkafka) with SASL_SSL against a node
// under --auth required that serves PLAIN and SCRAM-SHA-512 and no client
// certificate: bob authenticates with SCRAM-SHA-512 (a credential set by
// SetScramCredential), carol with PLAIN and her logd token; each writes
// and reads back the one topic its ACLs allow and is refused the other's;
// a wrong password and a mechanism not enabled fail.
func TestKafkaKcatSASL(t *testing.T) {
	bin := kcat(t)
	dir := certDir(t)
	issueNow(t, "client", "--dir", dir, "--name", "admin")
	kaddr := e2e.FreeAddr(t)
	nd := secureNode(t, dir, "n1", "--kafka-listen", kaddr, "--kafka-sasl-mechanisms", "PLAIN,SCRAM-SHA-512")
	nd.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := nd.RPC.SetScramCredential(ctx, connect.NewRequest(&logdv1.SetScramCredentialRequest{User: "bob", Mechanism: "SCRAM-SHA-512", Password: "bob-pw"})); err != nil {
		t.Fatal(err)
	}
	tok, err := nd.RPC.CreateToken(ctx, connect.NewRequest(&logdv1.CreateTokenRequest{Principal: "User:carol"}))
	if err != nil {
		t.Fatal(err)
	}
	var acls []*logdv1.ACL
	for _, user := range []string{"bob", "carol"} {
		e2e.CreateTopic(t, ctx, nd, "sasl-"+user, 1, nil)
		for _, op := range []string{"write", "read", "describe"} {
			acls = append(acls, &logdv1.ACL{Principal: "User:" + user, Resource: "topic", Pattern: "literal", Name: "sasl-" + user, Operation: op, Effect: "allow"})
		}
	}
	if _, err := nd.RPC.CreateACLs(ctx, connect.NewRequest(&logdv1.CreateACLsRequest{Acls: acls})); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		user, mech, password, other string
	}{
		{"bob", "SCRAM-SHA-512", "bob-pw", "sasl-carol"},
		{"carol", "PLAIN", tok.Msg.Token, "sasl-bob"},
	} {
		args := append([]string{"-b", kaddr}, kcatSASL(dir, c.mech, c.user, c.password)...)
		file := filepath.Join(t.TempDir(), "records.txt")
		var sb strings.Builder
		for i := range 20 {
			fmt.Fprintf(&sb, "%s-%02d\n", c.user, i)
		}
		if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		topic := "sasl-" + c.user
		runKcat(t, ctx, bin, append(args, "-P", "-t", topic, "-l", file)...)
		out := runKcat(t, ctx, bin, append(args, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")...)
		if out != sb.String() {
			t.Fatalf("%s (%s): kcat -C read %q, want %q", c.user, c.mech, out, sb.String())
		}
		refused := kcatFails(t, ctx, bin, append(args, "-P", "-t", c.other, "-l", file)...)
		if !strings.Contains(refused, "uthorization failed") {
			t.Errorf("%s: kcat -P to %s: want an authorization failure:\n%s", c.user, c.other, e2e.Tail(refused, 2000))
		}
	}

	// Refused, in parallel (each kcat waits out its -m).
	cases := map[string]struct {
		args []string
		want string
	}{
		"wrong password":   {kcatSASL(dir, "SCRAM-SHA-512", "bob", "nope"), "Authentication failed"},
		"not enabled":      {kcatSASL(dir, "SCRAM-SHA-256", "bob", "bob-pw"), "Unsupported SASL mechanism"},
		"token of another": {kcatSASL(dir, "PLAIN", "bob", tok.Msg.Token), "Authentication failed"},
	}
	type result struct {
		name string
		out  []byte
		err  error
	}
	results := make(chan result, len(cases))
	for name, tc := range cases {
		go func() {
			out, err := exec.CommandContext(ctx, bin, append([]string{"-b", kaddr, "-m", "3", "-L"}, tc.args...)...).CombinedOutput()
			results <- result{name, out, err}
		}()
	}
	for range cases {
		r := <-results
		if out := string(r.out); r.err == nil || !strings.Contains(out, cases[r.name].want) {
			t.Errorf("%s: kcat -L: %v, want a failure with %q:\n%s", r.name, r.err, cases[r.name].want, e2e.Tail(out, 2000))
		}
	}
}

// TestKafkaKafkajsSASL runs kafkajs with SASL over TLS (no client
// certificate) against a node under --auth required: plain (a logd
// token), scram-sha-256 and scram-sha-512 (credentials from
// SetScramCredential) each produce records and consume them back in a
// group, under ACLs that allow exactly their topic and group; a wrong
// password is refused.
func TestKafkaKafkajsSASL(t *testing.T) {
	bin := kafkajsNode(t)
	dir := certDir(t)
	issueNow(t, "client", "--dir", dir, "--name", "admin")
	kaddr := e2e.FreeAddr(t)
	nd := secureNode(t, dir, "n1", "--kafka-listen", kaddr, "--kafka-sasl-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"--kafka-group-initial-rebalance-delay", "100ms")
	nd.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, c := range []struct{ user, mech string }{{"sam", "SCRAM-SHA-256"}, {"sue", "SCRAM-SHA-512"}} {
		if _, err := nd.RPC.SetScramCredential(ctx, connect.NewRequest(&logdv1.SetScramCredentialRequest{User: c.user, Mechanism: c.mech, Password: c.user + "-pw"})); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := nd.RPC.CreateToken(ctx, connect.NewRequest(&logdv1.CreateTokenRequest{Principal: "User:tia"}))
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.crt")
	for _, c := range []struct{ user, mech, password string }{
		{"tia", "plain", tok.Msg.Token},
		{"sam", "scram-sha-256", "sam-pw"},
		{"sue", "scram-sha-512", "sue-pw"},
	} {
		topic, group := "js-"+c.user, "jsg-"+c.user
		e2e.CreateTopic(t, ctx, nd, topic, 1, nil)
		var acls []*logdv1.ACL
		for _, op := range []string{"write", "read", "describe"} {
			acls = append(acls, &logdv1.ACL{Principal: "User:" + c.user, Resource: "topic", Pattern: "literal", Name: topic, Operation: op, Effect: "allow"})
		}
		for _, op := range []string{"read", "describe"} {
			acls = append(acls, &logdv1.ACL{Principal: "User:" + c.user, Resource: "group", Pattern: "literal", Name: group, Operation: op, Effect: "allow"})
		}
		if _, err := nd.RPC.CreateACLs(ctx, connect.NewRequest(&logdv1.CreateACLsRequest{Acls: acls})); err != nil {
			t.Fatal(err)
		}
		var out struct {
			Produced int           `json:"produced"`
			Consumed []string      `json:"consumed"`
			Error    *kafkajsError `json:"error"`
		}
		runKafkajs(t, ctx, bin, "sasl", map[string]any{"broker": kaddr, "ca": ca, "topic": topic, "group": group, "count": 10, "timeoutMs": 60000,
			"sasl": map[string]string{"mechanism": c.mech, "username": c.user, "password": c.password}}, &out)
		if out.Error != nil || out.Produced != 10 || len(out.Consumed) != 10 {
			t.Fatalf("%s (%s): produced %d, consumed %d, error %+v", c.user, c.mech, out.Produced, len(out.Consumed), out.Error)
		}
	}
	var out struct {
		Error *kafkajsError `json:"error"`
	}
	runKafkajs(t, ctx, bin, "sasl", map[string]any{"broker": kaddr, "ca": ca, "topic": "js-sam", "group": "jsg-sam", "count": 1, "timeoutMs": 10000,
		"retries": 0, "sasl": map[string]string{"mechanism": "scram-sha-256", "username": "sam", "password": "nope"}}, &out)
	if out.Error == nil || !strings.Contains(fmt.Sprint(*out.Error), "SASL") {
		t.Fatalf("a wrong password: %+v; want a SASL authentication error", out.Error)
	}
}
