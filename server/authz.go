package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/queue"
)

// Authorization (docs/security.md, "ACLs"): one table, authzTable, maps
// every procedure to the permissions a call needs, computed from its
// typed request; one interceptor applies it before the handler runs, so a
// refused call reaches no handler and changes nothing. A write a follower
// forwards is checked on the follower first (forward_authz.go) and again
// on the leader, which sees the same principal.
//
// With AuthOptions.Required off nothing is checked. Superusers pass every
// check. Lists (topics, groups, queue groups, tokens, ACLs) need only a principal: their
// handlers leave out the rows the caller may not describe, as Kafka's
// metadata does, rather than failing.
//
// A call costs one lookup in the table and one Set.Authorize per
// permission, whatever the size of its request: a produce of a thousand
// records is checked once, for "write topic T" (authz_test.go shows it
// allocates no more than a produce of one).

// authzRule is one row of the permission table.
type authzRule struct {
	// need returns the permissions a call needs, all of them. A row
	// without need lets any authenticated principal make the call.
	need func(s *Server, msg any) []auth.Permission
	// or, if set, allows a call that need would refuse.
	or func(p auth.Principal, msg any) bool
	// filtered marks a list whose handler leaves out the rows the caller
	// may not describe.
	filtered bool
	// audit, if set, makes the call an admin action with one line in the
	// audit log (audit.go): it returns a summary of the request (names,
	// never record data or secrets), or false when this call is not an
	// admin action (a dry run).
	audit func(msg any) ([]slog.Attr, bool)
}

// on adapts a function of a typed request to a table row's need.
func on[T any](f func(s *Server, m *T) []auth.Permission) func(*Server, any) []auth.Permission {
	return func(s *Server, m any) []auth.Permission { return f(s, m.(*T)) }
}

// onAll is on for a permission that needs no server state.
func onAll[T any](f func(m *T) []auth.Permission) func(*Server, any) []auth.Permission {
	return func(_ *Server, m any) []auth.Permission { return f(m.(*T)) }
}

// summary adapts a typed audit summary; every call is an admin action.
func summary[T any](f func(m *T) []slog.Attr) func(any) ([]slog.Attr, bool) {
	return func(m any) ([]slog.Attr, bool) { return f(m.(*T)), true }
}

// summaryIf adapts a typed audit summary that may say the call is not an
// admin action.
func summaryIf[T any](f func(m *T) ([]slog.Attr, bool)) func(any) ([]slog.Attr, bool) {
	return func(m any) ([]slog.Attr, bool) { return f(m.(*T)) }
}

func perm(op auth.Operation, r auth.ResourceType, name string) auth.Permission {
	return auth.Permission{Op: op, Resource: r, Name: name}
}

func topicPerm(op auth.Operation, name string) auth.Permission {
	return perm(op, auth.ResourceTopic, name)
}

func groupPerm(op auth.Operation, name string) auth.Permission {
	return perm(op, auth.ResourceGroup, name)
}

func queuePerm(op auth.Operation, name string) auth.Permission {
	return perm(op, auth.ResourceQueue, name)
}

// clusterAdmin is cluster administration: membership and leadership.
var clusterAdmin = perm(auth.OpAdmin, auth.ResourceCluster, auth.ClusterName)

// clusterAlter and clusterDescribe are what the SCRAM credential
// procedures need.
var (
	clusterAlter    = perm(auth.OpAlter, auth.ResourceCluster, auth.ClusterName)
	clusterDescribe = perm(auth.OpDescribe, auth.ResourceCluster, auth.ClusterName)
)

// withTopics appends "op topic T" for each distinct topic.
func withTopics(ps []auth.Permission, op auth.Operation, topics ...string) []auth.Permission {
	for _, t := range topics {
		p := topicPerm(op, t)
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// deadLetterPerm adds "create topic D" when a queue group's dead-letter
// topic D would be created by the call (it does not exist yet).
func (s *Server) deadLetterPerm(ps []auth.Permission, topic, group string, cfg *logdv1.QueueGroupConfig, creating bool) []auth.Permission {
	dlq := ""
	switch {
	case cfg.GetDeadLetterTopic() != "":
		dlq = cfg.GetDeadLetterTopic()
	case creating:
		dlq = queue.DefaultDeadLetterTopic(topic, group)
	}
	if dlq == "" {
		return ps
	}
	if _, err := s.b.Topic(dlq); err != nil {
		ps = append(ps, topicPerm(auth.OpCreate, dlq))
	}
	return ps
}

// tokenName is the resource name of the tokens of a principal: its name.
// A principal that does not parse keeps its text, which no ACL but the
// literal "*" matches (the handler refuses it anyway).
func tokenName(principal string) string {
	if p, err := auth.ParsePrincipal(principal); err == nil {
		return p.Name
	}
	return principal
}

// redrivePerms are the permissions a started job id needed: read on its
// dead-letter topic, write on its target ("*" without one). For an id not
// kept, read and write on every topic ("*"), so the answer says nothing of
// other topics' jobs.
func (s *Server) redrivePerms(id string) []auth.Permission {
	dlq, target := "*", "*"
	if j, err := s.b.RedriveJob(id); err == nil {
		dlq = j.Spec.DeadLetterTopic
		if j.Spec.Target != "" {
			target = j.Spec.Target
		}
	}
	return []auth.Permission{topicPerm(auth.OpRead, dlq), topicPerm(auth.OpWrite, target)}
}

// allACLTypes are the resource types an ACL may be on: deleting ACLs of
// every type needs alter on each.
var allACLTypes = []auth.ResourceType{auth.ResourceTopic, auth.ResourceGroup, auth.ResourceQueue, auth.ResourceCluster, auth.ResourceToken, auth.ResourceACL}

func aclPerm(op auth.Operation, r auth.ResourceType) auth.Permission {
	return perm(op, auth.ResourceACL, r.String())
}

// authzTable maps each procedure to what a call needs. authz_test.go
// walks the service descriptor and fails for a procedure without a row.
var authzTable = map[string]authzRule{
	// Topics and records.
	logdv1connect.LogServiceCreateTopicProcedure: {
		need: onAll(func(m *logdv1.CreateTopicRequest) []auth.Permission {
			return []auth.Permission{topicPerm(auth.OpCreate, m.Name)}
		}),
		audit: summary(func(m *logdv1.CreateTopicRequest) []slog.Attr {
			return []slog.Attr{slog.String("topic", m.Name), slog.Int("partitions", int(m.Partitions)), configAttr(m.Config)}
		}),
	},
	logdv1connect.LogServiceListTopicsProcedure: {filtered: true},
	logdv1connect.LogServiceDescribeTopicProcedure: {need: onAll(func(m *logdv1.DescribeTopicRequest) []auth.Permission {
		return []auth.Permission{topicPerm(auth.OpDescribe, m.Name)}
	})},
	logdv1connect.LogServiceDeleteTopicProcedure: {
		need: onAll(func(m *logdv1.DeleteTopicRequest) []auth.Permission {
			return []auth.Permission{topicPerm(auth.OpDelete, m.Name)}
		}),
		audit: summary(func(m *logdv1.DeleteTopicRequest) []slog.Attr { return []slog.Attr{slog.String("topic", m.Name)} }),
	},
	logdv1connect.LogServiceAlterTopicProcedure: {
		need: onAll(func(m *logdv1.AlterTopicRequest) []auth.Permission {
			return []auth.Permission{topicPerm(auth.OpAlter, m.Name)}
		}),
		audit: summary(func(m *logdv1.AlterTopicRequest) []slog.Attr {
			return []slog.Attr{slog.String("topic", m.Name), configAttr(m.Config), slog.Any("delete_config", m.DeleteConfig)}
		}),
	},
	logdv1connect.LogServiceCreatePartitionsProcedure: {
		need: onAll(func(m *logdv1.CreatePartitionsRequest) []auth.Permission {
			return []auth.Permission{topicPerm(auth.OpAlter, m.Name)}
		}),
		audit: summaryIf(func(m *logdv1.CreatePartitionsRequest) ([]slog.Attr, bool) {
			return []slog.Attr{slog.String("topic", m.Name), slog.Int("count", int(m.Count))}, !m.ValidateOnly
		}),
	},
	logdv1connect.LogServiceProduceProcedure: {need: onAll(func(m *logdv1.ProduceRequest) []auth.Permission {
		return []auth.Permission{topicPerm(auth.OpWrite, m.Topic)}
	})},
	logdv1connect.LogServiceFetchProcedure: {need: onAll(func(m *logdv1.FetchRequest) []auth.Permission {
		return []auth.Permission{topicPerm(auth.OpRead, m.Topic)}
	})},
	logdv1connect.LogServiceListOffsetsProcedure: {need: onAll(func(m *logdv1.ListOffsetsRequest) []auth.Permission {
		return []auth.Permission{topicPerm(auth.OpDescribe, m.Topic)}
	})},

	// Consumer groups: a member reads the group and its topics.
	logdv1connect.LogServiceJoinGroupProcedure: {need: onAll(func(m *logdv1.JoinGroupRequest) []auth.Permission {
		return withTopics([]auth.Permission{groupPerm(auth.OpRead, m.Group)}, auth.OpRead, m.Topics...)
	})},
	logdv1connect.LogServiceGroupHeartbeatProcedure: {need: onAll(func(m *logdv1.GroupHeartbeatRequest) []auth.Permission {
		return []auth.Permission{groupPerm(auth.OpRead, m.Group)}
	})},
	logdv1connect.LogServiceLeaveGroupProcedure: {need: onAll(func(m *logdv1.LeaveGroupRequest) []auth.Permission {
		return []auth.Permission{groupPerm(auth.OpRead, m.Group)}
	})},
	logdv1connect.LogServiceCommitOffsetsProcedure: {need: onAll(func(m *logdv1.CommitOffsetsRequest) []auth.Permission {
		ps := []auth.Permission{groupPerm(auth.OpRead, m.Group)}
		for _, o := range m.Offsets {
			ps = withTopics(ps, auth.OpRead, o.GetTopic())
		}
		return ps
	})},
	logdv1connect.LogServiceGroupFetchProcedure: {need: onAll(func(m *logdv1.GroupFetchRequest) []auth.Permission {
		return []auth.Permission{groupPerm(auth.OpRead, m.Group), topicPerm(auth.OpRead, m.GetFetch().GetTopic())}
	})},
	logdv1connect.LogServiceListGroupsProcedure: {filtered: true},
	logdv1connect.LogServiceDescribeGroupProcedure: {need: onAll(func(m *logdv1.DescribeGroupRequest) []auth.Permission {
		return []auth.Permission{groupPerm(auth.OpDescribe, m.Group)}
	})},
	logdv1connect.LogServiceDeleteGroupProcedure: {
		need: onAll(func(m *logdv1.DeleteGroupRequest) []auth.Permission {
			return []auth.Permission{groupPerm(auth.OpDelete, m.Group)}
		}),
		audit: summary(func(m *logdv1.DeleteGroupRequest) []slog.Attr { return []slog.Attr{slog.String("group", m.Group)} }),
	},
	// A dry run only describes; executing changes the group.
	logdv1connect.LogServiceResetGroupOffsetsProcedure: {
		need: onAll(func(m *logdv1.ResetGroupOffsetsRequest) []auth.Permission {
			if m.Execute {
				return []auth.Permission{groupPerm(auth.OpAlter, m.Group)}
			}
			return []auth.Permission{groupPerm(auth.OpDescribe, m.Group)}
		}),
		audit: summaryIf(func(m *logdv1.ResetGroupOffsetsRequest) ([]slog.Attr, bool) {
			topics := make([]string, 0, len(m.Topics))
			for _, t := range m.Topics {
				topics = append(topics, t.GetTopic())
			}
			return []slog.Attr{slog.String("group", m.Group), slog.String("strategy", m.Strategy), slog.Any("topics", topics),
				slog.Bool("all_topics", m.AllTopics), slog.Int("explicit_offsets", len(m.Offsets))}, m.Execute
		}),
	},

	// Queue groups: the resource is the group's name.
	logdv1connect.LogServiceCreateQueueGroupProcedure: {
		need: on(func(s *Server, m *logdv1.CreateQueueGroupRequest) []auth.Permission {
			ps := []auth.Permission{queuePerm(auth.OpCreate, m.Group), topicPerm(auth.OpRead, m.Topic)}
			return s.deadLetterPerm(ps, m.Topic, m.Group, m.Config, true)
		}),
		audit: summary(func(m *logdv1.CreateQueueGroupRequest) []slog.Attr {
			return []slog.Attr{slog.String("topic", m.Topic), slog.String("group", m.Group), slog.String("dead_letter_topic", m.GetConfig().GetDeadLetterTopic()), slog.Bool("from_end", m.FromEnd)}
		}),
	},
	logdv1connect.LogServiceAlterQueueGroupProcedure: {
		need: on(func(s *Server, m *logdv1.AlterQueueGroupRequest) []auth.Permission {
			return s.deadLetterPerm([]auth.Permission{queuePerm(auth.OpAlter, m.Group)}, m.Topic, m.Group, m.Config, false)
		}),
		audit: summary(func(m *logdv1.AlterQueueGroupRequest) []slog.Attr {
			return []slog.Attr{slog.String("topic", m.Topic), slog.String("group", m.Group), slog.String("config", m.GetConfig().String())}
		}),
	},
	logdv1connect.LogServicePauseQueueGroupProcedure: {
		need: onAll(func(m *logdv1.PauseQueueGroupRequest) []auth.Permission {
			return []auth.Permission{queuePerm(auth.OpAlter, m.Group)}
		}),
		audit: summary(func(m *logdv1.PauseQueueGroupRequest) []slog.Attr {
			return []slog.Attr{slog.String("topic", m.Topic), slog.String("group", m.Group), slog.Bool("paused", m.Paused)}
		}),
	},
	logdv1connect.LogServiceDescribeQueueGroupProcedure: {need: onAll(func(m *logdv1.DescribeQueueGroupRequest) []auth.Permission {
		return []auth.Permission{queuePerm(auth.OpDescribe, m.Group)}
	})},
	logdv1connect.LogServiceListQueueGroupsProcedure: {filtered: true},
	logdv1connect.LogServiceClaimProcedure: {need: onAll(func(m *logdv1.ClaimRequest) []auth.Permission {
		return []auth.Permission{queuePerm(auth.OpRead, m.Group), topicPerm(auth.OpRead, m.Topic)}
	})},
	logdv1connect.LogServiceAckProcedure: {need: onAll(func(m *logdv1.AckRequest) []auth.Permission {
		return []auth.Permission{queuePerm(auth.OpRead, m.Group)}
	})},
	logdv1connect.LogServiceNackProcedure: {need: onAll(func(m *logdv1.NackRequest) []auth.Permission {
		return []auth.Permission{queuePerm(auth.OpRead, m.Group)}
	})},
	logdv1connect.LogServiceExtendProcedure: {need: onAll(func(m *logdv1.ExtendRequest) []auth.Permission {
		return []auth.Permission{queuePerm(auth.OpRead, m.Group)}
	})},

	// Redrive jobs: reading the dead-letter topic and writing to where the
	// records go (the target, or, without one, the origins, which are
	// known only from each record: then write on every topic, "*").
	logdv1connect.LogServiceStartRedriveProcedure: {
		need: onAll(func(m *logdv1.StartRedriveRequest) []auth.Permission {
			target := m.Target
			if target == "" {
				target = "*"
			}
			return []auth.Permission{topicPerm(auth.OpRead, m.DeadLetterTopic), topicPerm(auth.OpWrite, target)}
		}),
		audit: summary(func(m *logdv1.StartRedriveRequest) []slog.Attr {
			return []slog.Attr{slog.String("dead_letter_topic", m.DeadLetterTopic), slog.String("target", m.Target),
				slog.Any("reasons", m.Reasons), slog.Float64("rate", m.Rate), slog.Int("records", len(m.Records))}
		}),
	},
	logdv1connect.LogServiceStopRedriveProcedure: {
		need:  on(func(s *Server, m *logdv1.StopRedriveRequest) []auth.Permission { return s.redrivePerms(m.Id) }),
		audit: summary(func(m *logdv1.StopRedriveRequest) []slog.Attr { return []slog.Attr{slog.String("redrive", m.Id)} }),
	},
	logdv1connect.LogServiceDescribeRedriveProcedure: {need: on(func(s *Server, m *logdv1.DescribeRedriveRequest) []auth.Permission {
		return s.redrivePerms(m.Id)[:1]
	})},
	logdv1connect.LogServiceListRedrivesProcedure: {filtered: true},
	logdv1connect.LogServiceListDeadLettersProcedure: {need: onAll(func(m *logdv1.ListDeadLettersRequest) []auth.Permission {
		return []auth.Permission{topicPerm(auth.OpRead, m.Topic)}
	})},

	// The cluster. A node joins as itself (its node certificate) or by an
	// administrator.
	logdv1connect.LogServiceJoinProcedure: {
		need: onAll(func(*logdv1.JoinRequest) []auth.Permission { return []auth.Permission{clusterAdmin} }),
		or: func(p auth.Principal, m any) bool {
			return p.Type == auth.TypeNode && p.Name == m.(*logdv1.JoinRequest).NodeId
		},
		audit: summary(func(m *logdv1.JoinRequest) []slog.Attr {
			attrs := []slog.Attr{slog.String("node", m.NodeId), slog.String("raft_address", m.RaftAddress), slog.String("api_address", m.ApiAddress)}
			if m.PeerAddress != "" {
				attrs = append(attrs, slog.String("peer_address", m.PeerAddress))
			}
			if m.KafkaAddress != "" {
				attrs = append(attrs, slog.String("kafka_address", m.KafkaAddress))
			}
			if m.RegisterOnly {
				attrs = append(attrs, slog.Bool("register_only", true), slog.Uint64("feature_level", uint64(m.FeatureLevel)))
			}
			if m.SecretOnly {
				attrs = append(attrs, slog.Bool("secret_only", true))
			}
			return attrs
		}),
	},
	logdv1connect.LogServiceDrainNodeProcedure: {
		need: onAll(func(*logdv1.DrainNodeRequest) []auth.Permission { return []auth.Permission{clusterAdmin} }),
		audit: summary(func(m *logdv1.DrainNodeRequest) []slog.Attr {
			return []slog.Attr{slog.String("node", m.NodeId), slog.Bool("undo", m.Undo)}
		}),
	},
	// What Status shows of the data groups, read from the same table:
	// any principal may read it, as Status.
	logdv1connect.LogServiceListMovesProcedure:   {},
	logdv1connect.LogServicePlanBalanceProcedure: {},
	logdv1connect.LogServiceRemoveNodeProcedure: {
		need:  onAll(func(*logdv1.RemoveNodeRequest) []auth.Permission { return []auth.Permission{clusterAdmin} }),
		audit: summary(func(m *logdv1.RemoveNodeRequest) []slog.Attr { return []slog.Attr{slog.String("node", m.NodeId)} }),
	},
	logdv1connect.LogServiceTransferLeadershipProcedure: {
		need: onAll(func(*logdv1.TransferLeadershipRequest) []auth.Permission { return []auth.Permission{clusterAdmin} }),
		audit: summary(func(m *logdv1.TransferLeadershipRequest) []slog.Attr {
			return []slog.Attr{slog.String("node", m.NodeId)}
		}),
	},
	// A backup holds every record, and the tokens' hashes and ACLs.
	logdv1connect.LogServiceSaveSnapshotProcedure: {
		need:  onAll(func(*logdv1.SaveSnapshotRequest) []auth.Permission { return []auth.Permission{clusterAdmin} }),
		audit: summary(func(*logdv1.SaveSnapshotRequest) []slog.Attr { return nil }),
	},
	logdv1connect.LogServiceStatusProcedure: {},
	// Samples of what a describe of the same thing shows.
	logdv1connect.LogServiceGetHistoryProcedure: {need: onAll(func(m *logdv1.GetHistoryRequest) []auth.Permission {
		switch {
		case m.QueueGroup != "":
			return []auth.Permission{queuePerm(auth.OpDescribe, m.QueueGroup), topicPerm(auth.OpDescribe, m.Topic)}
		case m.Group != "":
			return []auth.Permission{groupPerm(auth.OpDescribe, m.Group)}
		}
		return []auth.Permission{topicPerm(auth.OpDescribe, m.Topic)}
	})},
	// An index, as Status shows the applied one.
	logdv1connect.LogServiceReadIndexProcedure: {},
	// A Kafka producer id: Kafka's IdempotentWrite, write on the topic
	// named (one the caller may write), or on the cluster.
	logdv1connect.LogServiceInitProducerIdProcedure: {
		need: onAll(func(m *logdv1.InitProducerIdRequest) []auth.Permission {
			if m.Topic == "" {
				return []auth.Permission{perm(auth.OpWrite, auth.ResourceCluster, auth.ClusterName)}
			}
			return []auth.Permission{topicPerm(auth.OpWrite, m.Topic)}
		}),
	},
	logdv1connect.LogServiceWhoAmIProcedure: {},

	// Tokens: the resource is the name of the user a token is for.
	logdv1connect.LogServiceCreateTokenProcedure: {
		need: onAll(func(m *logdv1.CreateTokenRequest) []auth.Permission {
			return []auth.Permission{perm(auth.OpCreate, auth.ResourceToken, tokenName(m.Principal))}
		}),
		audit: summary(func(m *logdv1.CreateTokenRequest) []slog.Attr {
			return []slog.Attr{slog.String("for", m.Principal), slog.String("description", m.Description), slog.Int64("ttl_ms", m.TtlMs)}
		}),
	},
	logdv1connect.LogServiceListTokensProcedure: {filtered: true},
	// Revoking an unknown token needs delete on every token ("*"), so
	// the answer says nothing of other users' token ids.
	logdv1connect.LogServiceRevokeTokenProcedure: {
		need: on(func(s *Server, m *logdv1.RevokeTokenRequest) []auth.Permission {
			name := "*"
			if v, ok := s.sec.Token(m.Id); ok {
				name = tokenName(v.Principal)
			}
			return []auth.Permission{perm(auth.OpDelete, auth.ResourceToken, name)}
		}),
		audit: summary(func(m *logdv1.RevokeTokenRequest) []slog.Attr { return []slog.Attr{slog.String("token", m.Id)} }),
	},

	// SCRAM credentials: the cluster, as Kafka's KIP-554 keys ask (and
	// the Kafka listener's, kafka/user_scram.go).
	logdv1connect.LogServiceSetScramCredentialProcedure: {
		need: onAll(func(*logdv1.SetScramCredentialRequest) []auth.Permission { return []auth.Permission{clusterAlter} }),
		audit: summary(func(m *logdv1.SetScramCredentialRequest) []slog.Attr {
			return []slog.Attr{slog.String("user", m.User), slog.String("mechanism", m.Mechanism), slog.Int("iterations", int(m.Iterations))}
		}),
	},
	logdv1connect.LogServiceListScramCredentialsProcedure: {
		need: onAll(func(*logdv1.ListScramCredentialsRequest) []auth.Permission { return []auth.Permission{clusterDescribe} }),
	},
	logdv1connect.LogServiceDeleteScramCredentialProcedure: {
		need: onAll(func(*logdv1.DeleteScramCredentialRequest) []auth.Permission { return []auth.Permission{clusterAlter} }),
		audit: summary(func(m *logdv1.DeleteScramCredentialRequest) []slog.Attr {
			return []slog.Attr{slog.String("user", m.User), slog.String("mechanism", m.Mechanism)}
		}),
	},

	// ACLs: the resource is the resource type of the ACLs changed.
	logdv1connect.LogServiceCreateACLsProcedure: {
		need: onAll(func(m *logdv1.CreateACLsRequest) []auth.Permission {
			var ps []auth.Permission
			for _, a := range m.Acls {
				if r, err := auth.ParseResourceType(a.GetResource()); err == nil && !slices.Contains(ps, aclPerm(auth.OpAlter, r)) {
					ps = append(ps, aclPerm(auth.OpAlter, r))
				}
			}
			return ps
		}),
		audit: summary(func(m *logdv1.CreateACLsRequest) []slog.Attr { return []slog.Attr{aclsAttr(m.Acls)} }),
	},
	logdv1connect.LogServiceListACLsProcedure: {filtered: true},
	// Without a resource type, a deletion may touch every type.
	logdv1connect.LogServiceDeleteACLsProcedure: {
		need: onAll(func(m *logdv1.DeleteACLsRequest) []auth.Permission {
			if r, err := auth.ParseResourceType(m.GetFilter().GetResource()); err == nil {
				return []auth.Permission{aclPerm(auth.OpAlter, r)}
			}
			ps := make([]auth.Permission, len(allACLTypes))
			for i, r := range allACLTypes {
				ps[i] = aclPerm(auth.OpAlter, r)
			}
			return ps
		}),
		audit: summaryIf(func(m *logdv1.DeleteACLsRequest) ([]slog.Attr, bool) {
			return []slog.Attr{slog.String("filter", m.GetFilter().String())}, !m.DryRun
		}),
	},
}

// configAttr lists the keys of a topic's settings (values may be long;
// the keys say what changed).
func configAttr(cfg map[string]string) slog.Attr {
	keys := make([]string, 0, len(cfg))
	for k, v := range cfg {
		keys = append(keys, k+"="+v)
	}
	slices.Sort(keys)
	return slog.String("config", strings.Join(keys, ","))
}

// aclsAttr renders ACLs for the audit log.
func aclsAttr(acls []*logdv1.ACL) slog.Attr {
	out := make([]string, len(acls))
	for i, a := range acls {
		out[i] = fmt.Sprintf("%s %s %s on %s %s %q", a.GetEffect(), a.GetPrincipal(), a.GetOperation(), a.GetResource(), a.GetPattern(), a.GetName())
	}
	return slog.Any("acls", out)
}

// errPermissionDenied refuses a call that lacks perm.
func errPermissionDenied(p auth.Principal, perm auth.Permission) error {
	return withInfo(connect.CodePermissionDenied,
		&logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_PERMISSION_DENIED, Permission: perm.String(), Principal: p.String()},
		fmt.Errorf("%s lacks permission %q", p, perm.String()))
}

// authorize checks a decoded call against the table: nil if it may run.
// The decision itself is auth.Authorizer's, the one the Kafka listener
// makes too.
func (s *Server) authorize(ctx context.Context, procedure string, msg any) error {
	if !s.authz.Required() {
		return nil
	}
	info := authFrom(ctx)
	if !info.authenticated() {
		// The authenticator refused such calls already; this holds should
		// a path reach a handler around it.
		return errUnauthenticated("authentication required")
	}
	if info.superuser {
		return nil
	}
	row, ok := authzTable[procedure]
	if !ok {
		return errPermissionDenied(info.principal, perm(auth.OpAdmin, auth.ResourceCluster, auth.ClusterName))
	}
	if row.or != nil && row.or(info.principal, msg) {
		return nil
	}
	if row.need == nil {
		return nil
	}
	for _, p := range row.need(s, msg) {
		if !s.authz.Allowed(info.principal, p) {
			return errPermissionDenied(info.principal, p)
		}
	}
	return nil
}

// may reports whether the call's principal holds p: a list handler's
// filter.
func (s *Server) may(ctx context.Context, p auth.Permission) bool {
	if !s.authz.Required() {
		return true
	}
	info := authFrom(ctx)
	return info.superuser || (info.authenticated() && s.authz.Allowed(info.principal, p))
}

// authzInterceptor applies the table before the handler.
func (s *Server) authzInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if err := s.authorize(ctx, req.Spec().Procedure, req.Any()); err != nil {
				return nil, err
			}
			return next(ctx, req)
		}
	}
}

// OpsGuard guards an operator's endpoint (/metrics, /healthz, /readyz,
// and cmd/logd's /debug/pprof/): with AuthOptions.Required and without
// MetricsPublic it needs describe on the cluster.
func (s *Server) OpsGuard(next http.Handler) http.Handler {
	if !s.auth.Required || s.auth.MetricsPublic {
		return next
	}
	need := perm(auth.OpDescribe, auth.ResourceCluster, auth.ClusterName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, err := s.authn.authenticate(r)
		switch {
		case err != nil:
		case !info.authenticated():
			err = errUnauthenticated("authentication required (or start logd with --metrics-public)")
		case !info.superuser && !s.authz.Allowed(info.principal, need):
			err = errPermissionDenied(info.principal, need)
		}
		if err != nil {
			s.authn.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
