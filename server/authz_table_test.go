package server

import (
	"context"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// topicLessBackend knows no topic: enough for the rows that look one up.
type topicLessBackend struct{ backend.API }

func (topicLessBackend) Topic(string) (backend.TopicInfo, error) {
	return backend.TopicInfo{}, backend.ErrUnknownTopic
}

func (topicLessBackend) RedriveJob(id string) (backend.RedriveJob, error) {
	return backend.RedriveJob{}, backend.ErrUnknownRedrive
}

func (topicLessBackend) Token(string) (auth.Verifier, bool) { return auth.Verifier{}, false }

// TestEveryProcedureHasARule walks the service descriptor: a procedure
// without a row in authzTable fails, and so does a row whose functions do
// not take the procedure's request type (they would panic on a call).
func TestEveryProcedureHasARule(t *testing.T) {
	s := &Server{b: topicLessBackend{}, sec: topicLessBackend{}}
	svc := logdv1.File_logd_v1_logd_proto.Services().ByName("LogService")
	if svc == nil {
		t.Fatal("no LogService in the descriptor")
	}
	seen := map[string]bool{}
	methods := svc.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		proc := "/" + logdv1connect.LogServiceName + "/" + string(m.Name())
		seen[proc] = true
		row, ok := authzTable[proc]
		if !ok {
			t.Errorf("%s has no row in authzTable (server/authz.go): say which permissions a call needs", proc)
			continue
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
		if err != nil {
			t.Fatal(err)
		}
		msg := mt.New().Interface()
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: a row function does not take %s: %v", proc, m.Input().FullName(), r)
				}
			}()
			if row.need != nil {
				row.need(s, msg)
			}
			if row.or != nil {
				row.or(BootstrapPrincipal, msg)
			}
			if row.audit != nil {
				row.audit(msg)
			}
		}()
		if row.filtered && row.need != nil {
			t.Errorf("%s: a filtered list needs nothing but a principal", proc)
		}
	}
	for proc := range authzTable {
		if !seen[proc] {
			t.Errorf("authzTable has a row for %s, which the service does not have", proc)
		}
	}
	if len(seen) < 30 {
		t.Fatalf("walked only %d methods", len(seen))
	}
}

// staticACLs is a security backend of fixed ACLs.
type staticACLs struct {
	backend.SecurityAPI
	set *auth.Set
}

func (s staticACLs) ACLs() *auth.Set { return s.set }

// TestAuthorizeCostIsPerRequest: authorizing a produce allocates the same
// for a thousand records as for one (one check per request), and counting
// its bytes for the quota allocates nothing.
func TestAuthorizeCostIsPerRequest(t *testing.T) {
	set, err := auth.NewSet([]auth.ACL{
		{Principal: "User:alice", Resource: auth.ResourceTopic, Pattern: auth.PatternPrefix, Name: "or", Operation: auth.OpWrite, Effect: auth.Allow},
		{Principal: "*", Resource: auth.ResourceTopic, Pattern: auth.PatternLiteral, Name: "x", Operation: auth.OpWrite, Effect: auth.Deny},
	})
	if err != nil {
		t.Fatal(err)
	}
	sec := staticACLs{set: set}
	s := &Server{auth: AuthOptions{Required: true}, sec: sec, authz: auth.NewAuthorizer(true, nil, sec.ACLs)}
	ctx := withAuth(context.Background(), &authInfo{principal: auth.User("alice"), method: methodToken})
	produce := func(n int) *logdv1.ProduceRequest {
		m := &logdv1.ProduceRequest{Topic: "orders"}
		for range n {
			m.Records = append(m.Records, &logdv1.Record{Key: []byte("k"), Value: []byte("value")})
		}
		return m
	}
	allocs := func(m *logdv1.ProduceRequest) float64 {
		return testing.AllocsPerRun(100, func() {
			if err := s.authorize(ctx, logdv1connect.LogServiceProduceProcedure, m); err != nil {
				t.Fatal(err)
			}
		})
	}
	one, many := allocs(produce(1)), allocs(produce(1000))
	if one != many || one > 1 {
		t.Errorf("authorizing a produce allocates %v times for one record, %v for a thousand; want the same, at most once", one, many)
	}
	m := produce(1000)
	if n := testing.AllocsPerRun(100, func() { producedBytes(m) }); n != 0 {
		t.Errorf("counting a produce's bytes allocates %v times", n)
	}
}
