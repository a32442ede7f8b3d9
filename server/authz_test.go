package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/queue"
)

// procCase is one call of TestAuthorizationEveryProcedure.
type procCase struct {
	proc string
	// call makes the call; for a list it returns the rows it got.
	call func(ctx context.Context, c logdv1connect.LogServiceClient) (rows int, err error)
	// grant is what the call needs (for a list: to see a row).
	grant []auth.ACL
	// anyone: any authenticated principal may make the call; list: the
	// call needs nothing but a principal, and shows only the rows the
	// caller may describe.
	anyone, list bool
	// admin: the call is an admin action, with a line in the audit log.
	// undecoded: the call is none, but its procedure may be one (a dry
	// run), so a call refused before it is decoded has a line.
	admin, undecoded bool
}

// checkAudit checks the audit log since the last check: one line for an
// admin call, by principal with outcome, and none for any other call.
func (e *authEnv) checkAudit(t *testing.T, tc procCase, principal, outcome string) {
	t.Helper()
	lines := e.auditLines()
	if tc.undecoded && outcome == connect.CodeUnauthenticated.String() {
		tc.admin = true
	}
	if !tc.admin {
		if len(lines) != 0 {
			t.Errorf("audit lines for %s, which is no admin action: %v", tc.proc, lines)
		}
		return
	}
	if len(lines) != 1 {
		t.Errorf("%d audit lines for %s by %s, want 1: %v", len(lines), tc.proc, principal, lines)
		return
	}
	l := lines[0]
	if l["msg"] != "audit" || l["procedure"] != tc.proc || l["principal"] != principal || l["outcome"] != outcome || l["remote"] == "" {
		t.Errorf("audit line %v, want procedure %s, principal %s, outcome %s and a remote address", l, tc.proc, principal, outcome)
	}
}

// ok wraps a call that returns no rows.
func ok[T any](f func(ctx context.Context, c logdv1connect.LogServiceClient) (T, error)) func(context.Context, logdv1connect.LogServiceClient) (int, error) {
	return func(ctx context.Context, c logdv1connect.LogServiceClient) (int, error) {
		_, err := f(ctx, c)
		return 0, err
	}
}

func req[T any](m *T) *connect.Request[T] { return connect.NewRequest(m) }

// TestAuthorizationEveryProcedure calls every procedure of the service
// three times: anonymously (UNAUTHENTICATED), as a principal without the
// permissions (PERMISSION_DENIED, and nothing changes: no Raft entry is
// applied and the tokens and ACLs stay), and as one with them (no auth
// error: the call may still fail for its own reasons). An admin action
// writes one audit line each time, with its outcome; other calls none.
func TestAuthorizationEveryProcedure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := newAuthEnv(t, ctx, envConfig{})
	admin := e.client(e.admin)

	// The fixture: topics t and del1, a record in t, a queue group q on
	// t, a member of group g, and a token of erin's to revoke.
	for _, name := range []string{"t", "del1"} {
		if _, err := admin.CreateTopic(ctx, req(&logdv1.CreateTopicRequest{Name: name, Partitions: 1})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Produce(ctx, req(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{{Value: []byte("v")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateQueueGroup(ctx, req(&logdv1.CreateQueueGroupRequest{Topic: "t", Group: "q"})); err != nil {
		t.Fatal(err)
	}
	joined, err := admin.JoinGroup(ctx, req(&logdv1.JoinGroupRequest{Group: "g", MemberId: "m1", Topics: []string{"t"}}))
	if err != nil {
		t.Fatal(err)
	}
	member, gen := "m1", joined.Msg.GetAssignment().GetGeneration()
	redrive, err := admin.StartRedrive(ctx, req(&logdv1.StartRedriveRequest{DeadLetterTopic: "t", Target: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	erin, err := admin.CreateToken(ctx, req(&logdv1.CreateTokenRequest{Principal: "erin"}))
	if err != nil {
		t.Fatal(err)
	}
	dlq2 := queue.DefaultDeadLetterTopic("t", "q2")
	const (
		topic   = auth.ResourceTopic
		group   = auth.ResourceGroup
		qu      = auth.ResourceQueue
		cluster = auth.ResourceCluster
		token   = auth.ResourceToken
		acl     = auth.ResourceACL
		lit     = auth.PatternLiteral
	)
	g := func(r auth.ResourceType, name string, op auth.Operation) auth.ACL { return allow("", r, lit, name, op) }
	cases := []procCase{
		{proc: "CreateTopic", admin: true, grant: []auth.ACL{g(topic, "new1", auth.OpCreate)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.CreateTopic(ctx, req(&logdv1.CreateTopicRequest{Name: "new1", Partitions: 1}))
			})},
		{proc: "ListTopics", list: true, grant: []auth.ACL{g(topic, "t", auth.OpDescribe)},
			call: func(ctx context.Context, c logdv1connect.LogServiceClient) (int, error) {
				r, err := c.ListTopics(ctx, req(&logdv1.ListTopicsRequest{}))
				if err != nil {
					return 0, err
				}
				return len(r.Msg.Topics), nil
			}},
		{proc: "DescribeTopic", grant: []auth.ACL{g(topic, "t", auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DescribeTopic(ctx, req(&logdv1.DescribeTopicRequest{Name: "t"}))
			})},
		{proc: "GetHistory", grant: []auth.ACL{g(topic, "t", auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.GetHistory(ctx, req(&logdv1.GetHistoryRequest{Topic: "t"}))
			})},
		{proc: "GetHistory", grant: []auth.ACL{g(group, "g", auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.GetHistory(ctx, req(&logdv1.GetHistoryRequest{Group: "g"}))
			})},
		{proc: "GetHistory", grant: []auth.ACL{g(qu, "q", auth.OpDescribe), g(topic, "t", auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.GetHistory(ctx, req(&logdv1.GetHistoryRequest{Topic: "t", QueueGroup: "q"}))
			})},
		{proc: "DeleteTopic", admin: true, grant: []auth.ACL{g(topic, "del1", auth.OpDelete)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DeleteTopic(ctx, req(&logdv1.DeleteTopicRequest{Name: "del1"}))
			})},
		{proc: "AlterTopic", admin: true, grant: []auth.ACL{g(topic, "t", auth.OpAlter)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.AlterTopic(ctx, req(&logdv1.AlterTopicRequest{Name: "t", Config: map[string]string{"retention.ms": "86400000"}}))
			})},
		{proc: "CreatePartitions", admin: true, grant: []auth.ACL{g(topic, "t", auth.OpAlter)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.CreatePartitions(ctx, req(&logdv1.CreatePartitionsRequest{Name: "t", Count: 2}))
			})},
		// A Kafka producer id rests on write on the topic named.
		{proc: "InitProducerId", grant: []auth.ACL{g(topic, "t", auth.OpWrite)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.InitProducerId(ctx, req(&logdv1.InitProducerIdRequest{Topic: "t"}))
			})},
		{proc: "Produce", grant: []auth.ACL{g(topic, "t", auth.OpWrite)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.Produce(ctx, req(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{{Value: []byte("x")}}}))
			})},
		{proc: "Fetch", grant: []auth.ACL{g(topic, "t", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.Fetch(ctx, req(&logdv1.FetchRequest{Topic: "t"}))
			})},
		{proc: "ListOffsets", grant: []auth.ACL{g(topic, "t", auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.ListOffsets(ctx, req(&logdv1.ListOffsetsRequest{Topic: "t"}))
			})},
		{proc: "Status", anyone: true,
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.Status(ctx, req(&logdv1.StatusRequest{}))
			})},
		{proc: "ListMoves", anyone: true,
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.ListMoves(ctx, req(&logdv1.ListMovesRequest{}))
			})},
		{proc: "PlanBalance", anyone: true,
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.PlanBalance(ctx, req(&logdv1.PlanBalanceRequest{}))
			})},
		{proc: "ReadIndex", anyone: true,
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.ReadIndex(ctx, req(&logdv1.ReadIndexRequest{}))
			})},
		{proc: "WhoAmI", anyone: true,
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.WhoAmI(ctx, req(&logdv1.WhoAmIRequest{}))
			})},
		{proc: "JoinGroup", grant: []auth.ACL{g(group, "g2", auth.OpRead), g(topic, "t", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.JoinGroup(ctx, req(&logdv1.JoinGroupRequest{Group: "g2", MemberId: "m2", Topics: []string{"t"}}))
			})},
		{proc: "GroupHeartbeat", grant: []auth.ACL{g(group, "g", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.GroupHeartbeat(ctx, req(&logdv1.GroupHeartbeatRequest{Group: "g", MemberId: member}))
			})},
		{proc: "CommitOffsets", grant: []auth.ACL{g(group, "g", auth.OpRead), g(topic, "t", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.CommitOffsets(ctx, req(&logdv1.CommitOffsetsRequest{Group: "g", MemberId: member, Generation: gen,
					Offsets: []*logdv1.GroupOffset{{Topic: "t", Partition: 0, Offset: 1}}}))
			})},
		{proc: "GroupFetch", grant: []auth.ACL{g(group, "g", auth.OpRead), g(topic, "t", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.GroupFetch(ctx, req(&logdv1.GroupFetchRequest{Group: "g", MemberId: member, Generation: gen, Fetch: &logdv1.FetchRequest{Topic: "t"}}))
			})},
		{proc: "ListGroups", list: true, grant: []auth.ACL{g(group, "g", auth.OpDescribe)},
			call: func(ctx context.Context, c logdv1connect.LogServiceClient) (int, error) {
				r, err := c.ListGroups(ctx, req(&logdv1.ListGroupsRequest{}))
				if err != nil {
					return 0, err
				}
				return len(r.Msg.Groups), nil
			}},
		{proc: "DescribeGroup", grant: []auth.ACL{g(group, "g", auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DescribeGroup(ctx, req(&logdv1.DescribeGroupRequest{Group: "g"}))
			})},
		{proc: "ResetGroupOffsets", undecoded: true, grant: []auth.ACL{g(group, "g", auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.ResetGroupOffsets(ctx, req(&logdv1.ResetGroupOffsetsRequest{Group: "g", AllTopics: true, Strategy: "to-earliest"}))
			})},
		{proc: "ResetGroupOffsets", admin: true, grant: []auth.ACL{g(group, "g", auth.OpAlter)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.ResetGroupOffsets(ctx, req(&logdv1.ResetGroupOffsetsRequest{Group: "g", AllTopics: true, Strategy: "to-earliest", Execute: true}))
			})},
		{proc: "LeaveGroup", grant: []auth.ACL{g(group, "g", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.LeaveGroup(ctx, req(&logdv1.LeaveGroupRequest{Group: "g", MemberId: member}))
			})},
		{proc: "DeleteGroup", admin: true, grant: []auth.ACL{g(group, "g", auth.OpDelete)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DeleteGroup(ctx, req(&logdv1.DeleteGroupRequest{Group: "g"}))
			})},
		{proc: "CreateQueueGroup", admin: true, grant: []auth.ACL{g(qu, "q2", auth.OpCreate), g(topic, "t", auth.OpRead), g(topic, dlq2, auth.OpCreate)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.CreateQueueGroup(ctx, req(&logdv1.CreateQueueGroupRequest{Topic: "t", Group: "q2"}))
			})},
		{proc: "AlterQueueGroup", admin: true, grant: []auth.ACL{g(qu, "q", auth.OpAlter)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				n := int32(7)
				return c.AlterQueueGroup(ctx, req(&logdv1.AlterQueueGroupRequest{Topic: "t", Group: "q", Config: &logdv1.QueueGroupConfig{MaxDeliveries: &n}}))
			})},
		{proc: "DescribeQueueGroup", grant: []auth.ACL{g(qu, "q", auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DescribeQueueGroup(ctx, req(&logdv1.DescribeQueueGroupRequest{Topic: "t", Group: "q"}))
			})},
		{proc: "ListQueueGroups", list: true, grant: []auth.ACL{g(qu, "q", auth.OpDescribe)},
			call: func(ctx context.Context, c logdv1connect.LogServiceClient) (int, error) {
				r, err := c.ListQueueGroups(ctx, req(&logdv1.ListQueueGroupsRequest{}))
				if err != nil {
					return 0, err
				}
				return len(r.Msg.Groups), nil
			}},
		{proc: "Claim", grant: []auth.ACL{g(qu, "q", auth.OpRead), g(topic, "t", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.Claim(ctx, req(&logdv1.ClaimRequest{Topic: "t", Group: "q", MaxRecords: 1}))
			})},
		{proc: "Ack", grant: []auth.ACL{g(qu, "q", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.Ack(ctx, req(&logdv1.AckRequest{Topic: "t", Group: "q", Tokens: []string{"x"}}))
			})},
		{proc: "Nack", grant: []auth.ACL{g(qu, "q", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.Nack(ctx, req(&logdv1.NackRequest{Topic: "t", Group: "q", Nacks: []*logdv1.QueueNack{{Token: "x"}}}))
			})},
		{proc: "Extend", grant: []auth.ACL{g(qu, "q", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.Extend(ctx, req(&logdv1.ExtendRequest{Topic: "t", Group: "q", Tokens: []string{"x"}, LeaseMs: 1000}))
			})},
		{proc: "PauseQueueGroup", admin: true, grant: []auth.ACL{g(qu, "q", auth.OpAlter)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.PauseQueueGroup(ctx, req(&logdv1.PauseQueueGroupRequest{Topic: "t", Group: "q", Paused: true}))
			})},
		{proc: "StartRedrive", admin: true, grant: []auth.ACL{g(topic, "t", auth.OpRead), g(topic, "t", auth.OpWrite)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.StartRedrive(ctx, req(&logdv1.StartRedriveRequest{DeadLetterTopic: "t", Target: "t"}))
			})},
		{proc: "DescribeRedrive", grant: []auth.ACL{g(topic, "t", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DescribeRedrive(ctx, req(&logdv1.DescribeRedriveRequest{Id: redrive.Msg.Job.Id}))
			})},
		{proc: "ListDeadLetters", grant: []auth.ACL{g(topic, "t", auth.OpRead)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.ListDeadLetters(ctx, req(&logdv1.ListDeadLettersRequest{Topic: "t"}))
			})},
		{proc: "ListRedrives", list: true, grant: []auth.ACL{g(topic, "t", auth.OpRead)},
			call: func(ctx context.Context, c logdv1connect.LogServiceClient) (int, error) {
				r, err := c.ListRedrives(ctx, req(&logdv1.ListRedrivesRequest{}))
				if err != nil {
					return 0, err
				}
				return len(r.Msg.Jobs), nil
			}},
		{proc: "StopRedrive", admin: true, grant: []auth.ACL{g(topic, "t", auth.OpRead), g(topic, "t", auth.OpWrite)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.StopRedrive(ctx, req(&logdv1.StopRedriveRequest{Id: redrive.Msg.Job.Id}))
			})},
		{proc: "Join", admin: true, grant: []auth.ACL{g(cluster, auth.ClusterName, auth.OpAdmin)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.Join(ctx, req(&logdv1.JoinRequest{NodeId: "n9", RaftAddress: "127.0.0.1:1", ApiAddress: "127.0.0.1:1"}))
			})},
		{proc: "RemoveNode", admin: true, grant: []auth.ACL{g(cluster, auth.ClusterName, auth.OpAdmin)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.RemoveNode(ctx, req(&logdv1.RemoveNodeRequest{NodeId: "n9"}))
			})},
		{proc: "DrainNode", admin: true, grant: []auth.ACL{g(cluster, auth.ClusterName, auth.OpAdmin)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DrainNode(ctx, req(&logdv1.DrainNodeRequest{NodeId: "n9"}))
			})},
		{proc: "TransferLeadership", admin: true, grant: []auth.ACL{g(cluster, auth.ClusterName, auth.OpAdmin)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.TransferLeadership(ctx, req(&logdv1.TransferLeadershipRequest{NodeId: "n9"}))
			})},
		{proc: "SaveSnapshot", admin: true, grant: []auth.ACL{g(cluster, auth.ClusterName, auth.OpAdmin)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				// A stream's refusal comes with its first receive.
				s, err := c.SaveSnapshot(ctx, req(&logdv1.SaveSnapshotRequest{}))
				if err != nil {
					return nil, err
				}
				defer s.Close()
				for s.Receive() {
				}
				return nil, s.Err()
			})},
		{proc: "CreateToken", admin: true, grant: []auth.ACL{g(token, "carol", auth.OpCreate)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.CreateToken(ctx, req(&logdv1.CreateTokenRequest{Principal: "User:carol"}))
			})},
		{proc: "ListTokens", list: true, grant: []auth.ACL{g(token, "erin", auth.OpDescribe)},
			call: func(ctx context.Context, c logdv1connect.LogServiceClient) (int, error) {
				r, err := c.ListTokens(ctx, req(&logdv1.ListTokensRequest{}))
				if err != nil {
					return 0, err
				}
				return len(r.Msg.Tokens), nil
			}},
		{proc: "RevokeToken", admin: true, grant: []auth.ACL{g(token, "erin", auth.OpDelete)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.RevokeToken(ctx, req(&logdv1.RevokeTokenRequest{Id: erin.Msg.Info.Id}))
			})},
		{proc: "SetScramCredential", admin: true, grant: []auth.ACL{g(cluster, auth.ClusterName, auth.OpAlter)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.SetScramCredential(ctx, req(&logdv1.SetScramCredentialRequest{User: "carol", Mechanism: "SCRAM-SHA-256", Password: "pw"}))
			})},
		{proc: "ListScramCredentials", grant: []auth.ACL{g(cluster, auth.ClusterName, auth.OpDescribe)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.ListScramCredentials(ctx, req(&logdv1.ListScramCredentialsRequest{}))
			})},
		{proc: "DeleteScramCredential", admin: true, grant: []auth.ACL{g(cluster, auth.ClusterName, auth.OpAlter)},
			// The credential SetScramCredential's case set.
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DeleteScramCredential(ctx, req(&logdv1.DeleteScramCredentialRequest{User: "carol", Mechanism: "SCRAM-SHA-256"}))
			})},
		{proc: "CreateACLs", admin: true, grant: []auth.ACL{g(acl, "topic", auth.OpAlter)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.CreateACLs(ctx, req(&logdv1.CreateACLsRequest{Acls: []*logdv1.ACL{
					{Principal: "User:x", Resource: "topic", Pattern: "literal", Name: "t", Operation: "read", Effect: "allow"}}}))
			})},
		{proc: "ListACLs", list: true, grant: []auth.ACL{g(acl, "topic", auth.OpDescribe)},
			call: func(ctx context.Context, c logdv1connect.LogServiceClient) (int, error) {
				r, err := c.ListACLs(ctx, req(&logdv1.ListACLsRequest{}))
				if err != nil {
					return 0, err
				}
				return len(r.Msg.Acls), nil
			}},
		{proc: "DeleteACLs", admin: true, grant: []auth.ACL{g(acl, "group", auth.OpAlter)},
			call: ok(func(ctx context.Context, c logdv1connect.LogServiceClient) (any, error) {
				return c.DeleteACLs(ctx, req(&logdv1.DeleteACLsRequest{Filter: &logdv1.ACLFilter{Resource: "group", Name: "zzz"}}))
			})},
	}

	// Every procedure of the service has a case.
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.proc] = true
	}
	methods := logdv1.File_logd_v1_logd_proto.Services().ByName("LogService").Methods()
	for i := range methods.Len() {
		if name := string(methods.Get(i).Name()); !covered[name] {
			t.Errorf("no case calls %s", name)
		}
	}

	anon := e.client("")
	nobody := e.client(e.user(ctx, "nobody"))
	for i, tc := range cases {
		granted := fmt.Sprintf("case%d-%s", i, strings.ToLower(tc.proc))
		for j := range tc.grant {
			tc.grant[j].Principal = "User:" + granted
		}
		withPerm := e.client(e.user(ctx, granted, tc.grant...))
		t.Run(tc.proc, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			e.audit.Reset()
			if _, err := tc.call(cctx, anon); connect.CodeOf(err) != connect.CodeUnauthenticated ||
				errorInfo(err).GetReason() != logdv1.Reason_REASON_UNAUTHENTICATED {
				t.Errorf("anonymous: %v, want UNAUTHENTICATED", err)
			}
			e.checkAudit(t, tc, "User:ANONYMOUS", connect.CodeUnauthenticated.String())
			before := e.state()
			rows, err := tc.call(cctx, nobody)
			switch {
			case tc.anyone && err != nil:
				t.Errorf("without permissions: %v, want success", err)
			case tc.list && (err != nil || rows != 0):
				t.Errorf("without permissions: %d rows, %v; want none", rows, err)
			case !tc.anyone && !tc.list:
				info := errorInfo(err)
				if connect.CodeOf(err) != connect.CodePermissionDenied || info.GetReason() != logdv1.Reason_REASON_PERMISSION_DENIED ||
					info.GetPrincipal() != "User:nobody" || info.GetPermission() == "" {
					t.Errorf("without permissions: %v (%v), want PERMISSION_DENIED naming the permission", err, info)
				}
				if after := e.state(); after != before {
					t.Errorf("a refused call changed the state: %v -> %v", before, after)
				}
				e.checkAudit(t, tc, "User:nobody", connect.CodePermissionDenied.String())
			}
			rows, err = tc.call(cctx, withPerm)
			outcome := "ok"
			if err != nil {
				outcome = connect.CodeOf(err).String()
			}
			e.checkAudit(t, tc, "User:"+granted, outcome)
			switch code := connect.CodeOf(err); {
			case err != nil && (code == connect.CodeUnauthenticated || code == connect.CodePermissionDenied):
				t.Errorf("with %v: %v", tc.grant, err)
			case tc.list && rows == 0:
				t.Errorf("with %v: no rows", tc.grant)
			}
		})
	}
}
