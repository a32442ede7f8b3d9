package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/auth/certid"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/quota"
)

// Authentication, authorization, quotas and the audit log of the Kafka
// listener (docs/security.md, "Kafka listener").
//
// A connection is authenticated when it opens: over TLS, the principal of
// the client certificate the handshake verified (package auth/certid, as
// the Connect API reads it); otherwise, or without a certificate, the
// anonymous principal. It may then authenticate once by SASL
// (auth_sasl.go), whose principal replaces the certificate's. With the
// Authorizer's checks on (--auth required), a connection without a
// verified certificate naming a principal is closed before any request
// is read when no SASL mechanism is enabled, and otherwise may send
// nothing but ApiVersions and the SASL requests until it authenticates.
//
// Every request is then checked against one table, authzTable, which says
// for each API key the operation it needs on each topic and group it
// names and on the cluster; the decision is auth.Authorizer's, the one
// the Connect API makes with the same ACLs and superusers. As in Kafka,
// a request is refused per resource, not whole: a topic the principal
// may not write gets TOPIC_AUTHORIZATION_FAILED and nothing is written
// to it, while the other topics of the request go on; Metadata leaves
// out of a listing the topics the principal may not describe.

// AuthOptions configures who may use the listener and what they may do.
// The zero value authenticates nobody and checks nothing (--auth none).
type AuthOptions struct {
	// Authorizer decides permissions: the node's, which the Connect API
	// asks too (the same ACLs and superusers). Nil checks nothing. With
	// its checks on, a connection needs a verified client certificate
	// naming a principal (so the listener must be TLS with client
	// certificates required).
	Authorizer *auth.Authorizer
	// Quotas are the node's per-principal byte-rate buckets, shared with
	// the Connect API; nil bounds nothing.
	Quotas *quota.Limiter
	// Audit receives one line per admin action (audit); nil logs them
	// on Options.Logger.
	Audit *slog.Logger
	// HandshakeTimeout bounds a TLS handshake; default 10s.
	HandshakeTimeout time.Duration
	// VerifiedNode returns the node id of a connection's certificate when
	// the cluster CA signed it (peer.TLS.VerifiedNode; nil: none is). A
	// certificate whose URI SAN claims a node, signed by any other CA the
	// listener trusts for clients, is refused: only the cluster CA names
	// nodes, as on the Connect API.
	VerifiedNode func(*tls.ConnectionState) (string, bool)
	// SASL enables SASL mechanisms (auth_sasl.go).
	SASL SASLOptions
}

// defaultHandshakeTimeout is AuthOptions.HandshakeTimeout's default.
const defaultHandshakeTimeout = 10 * time.Second

// The authentication methods, as the audit log names them (the Connect
// API's names).
const (
	methodNone        = "none"
	methodCertificate = "certificate"
)

// verifiedNode is AuthOptions.VerifiedNode, or false without one.
func (s *Server) verifiedNode(cs *tls.ConnectionState) (string, bool) {
	if s.nodeOf == nil {
		return "", false
	}
	return s.nodeOf(cs)
}

// required reports whether the listener checks permissions.
func (s *Server) required() bool { return s.authz != nil && s.authz.Required() }

// authenticate runs the TLS handshake of a TLS connection and names its
// principal. It returns false, having counted and logged why, for a
// connection to close: a failed handshake, or with checks on, no
// verified certificate naming a principal.
func (c *conn) authenticate() bool {
	s := c.s
	c.principal, c.method = auth.Anonymous, methodNone
	tc, isTLS := c.nc.(*tls.Conn)
	if isTLS {
		c.nc.SetDeadline(time.Now().Add(s.handshakeTimeout))
		ctx, cancel := context.WithTimeout(c.ctx, s.handshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		c.nc.SetDeadline(time.Time{})
		if err != nil {
			return c.refuse("handshake", err)
		}
		if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
			p, ok := certid.Principal(chains[0][0])
			if !ok && s.required() {
				return c.refuse("no_principal", errors.New("the client certificate names no principal (no logd://user/ or logd://node/ URI SAN, and no usable common name)"))
			}
			if ok && p.Type == auth.TypeNode {
				cs := tc.ConnectionState()
				if id, node := s.verifiedNode(&cs); !node || id != p.Name {
					return c.refuse("not_node", fmt.Errorf("the client certificate claims node %s, but only the cluster CA's certificates name nodes", p.Name))
				}
			}
			if ok {
				c.principal, c.method = p, methodCertificate
			}
		}
	}
	if s.required() && c.method == methodNone {
		if len(s.sasl.Mechanisms) == 0 {
			return c.refuse("no_certificate", errors.New("authentication required: connect over TLS with a client certificate (no SASL mechanism is enabled)"))
		}
		// The connection authenticates by SASL before anything else.
		c.saslPending = true
		c.preAuth.Store(true)
	}
	if c.method != methodNone {
		// The backend records who created a topic, and bounds topics per
		// principal, from the context.
		c.ctx = backend.WithPrincipal(c.ctx, c.principal)
		c.pollCtx = backend.WithPrincipal(c.pollCtx, c.principal)
	}
	return true
}

// refuse counts and logs a connection closed before its first request.
func (c *conn) refuse(reason string, err error) bool {
	c.s.metrics.unauthenticated.WithLabelValues(reason).Inc()
	c.s.logger.Debug("kafka: connection refused", "reason", reason, "remote", c.nc.RemoteAddr().String(), "err", err)
	return false
}

// authzRule is what one API key needs: an operation on each topic the
// request names, on each group, and on the cluster (0: none). Handlers
// ask through reqCtx (mayTopic, mayGroup, mayCluster), which take the
// operation from here, so a handler never chooses one itself.
type authzRule struct {
	topic, group, cluster auth.Operation
	// filtered: a listing leaves out what the principal may not
	// describe instead of refusing it (Metadata of every topic,
	// ListGroups).
	filtered bool
	// audit: the request is an admin action, with one audit line per
	// resource it changes (never for a validate-only request).
	audit bool
}

// authzTable is the Kafka listener's permissions, mirroring the Connect
// API's table (server/authz.go, docs/security.md): Produce writes,
// Fetch reads, ListOffsets, Metadata and DescribeConfigs describe,
// CreateTopics, DeleteTopics and (Incremental)AlterConfigs create, delete
// and alter a topic; DescribeConfigs and (Incremental)AlterConfigs of a
// broker describe and alter the cluster. The group keys need what the
// Connect API's group procedures do (a member reads the group, and the
// topics whose offsets it commits; describing, listing and fetching
// offsets describe; deleting deletes), and, where the Connect API has no
// procedure, what Kafka asks (OffsetFetch describes the topics,
// OffsetDelete deletes in the group and reads the topic). A member's
// subscribed topics, opaque in JoinGroup, are checked where they are
// read and committed. A Metadata request that creates a topic needs
// CreateTopics' permission on it (mayAutoCreate). ApiVersions,
// SaslHandshake and SaslAuthenticate need nothing; the SCRAM admin keys
// describe and alter the cluster, as in Kafka.
// auth_test.go fails for a served key without a row.
var authzTable = map[int16]authzRule{
	kmsg.ApiVersions.Int16():      {},
	kmsg.SASLHandshake.Int16():    {},
	kmsg.SASLAuthenticate.Int16(): {},
	// Kafka's: describe and alter the cluster.
	kmsg.DescribeUserSCRAMCredentials.Int16(): {cluster: auth.OpDescribe},
	kmsg.AlterUserSCRAMCredentials.Int16():    {cluster: auth.OpAlter, audit: true},

	kmsg.Produce.Int16():                 {topic: auth.OpWrite},
	kmsg.Fetch.Int16():                   {topic: auth.OpRead},
	kmsg.ListOffsets.Int16():             {topic: auth.OpDescribe},
	kmsg.Metadata.Int16():                {topic: auth.OpDescribe, filtered: true},
	kmsg.CreateTopics.Int16():            {topic: auth.OpCreate, audit: true},
	kmsg.DeleteTopics.Int16():            {topic: auth.OpDelete, audit: true},
	kmsg.DescribeConfigs.Int16():         {topic: auth.OpDescribe, cluster: auth.OpDescribe, group: auth.OpDescribe},
	kmsg.IncrementalAlterConfigs.Int16(): {topic: auth.OpAlter, cluster: auth.OpAlter, group: auth.OpAlter, audit: true},
	kmsg.CreatePartitions.Int16():        {topic: auth.OpAlter, audit: true},
	kmsg.AlterConfigs.Int16():            {topic: auth.OpAlter, cluster: auth.OpAlter, audit: true},
	// Kafka's IdempotentWrite: write on the cluster or on any topic.
	kmsg.InitProducerID.Int16(): {topic: auth.OpWrite, cluster: auth.OpWrite},

	kmsg.FindCoordinator.Int16(): {group: auth.OpDescribe},
	kmsg.JoinGroup.Int16():       {group: auth.OpRead},
	kmsg.SyncGroup.Int16():       {group: auth.OpRead},
	kmsg.Heartbeat.Int16():       {group: auth.OpRead},
	kmsg.LeaveGroup.Int16():      {group: auth.OpRead},
	kmsg.OffsetCommit.Int16():    {group: auth.OpRead, topic: auth.OpRead},
	kmsg.OffsetFetch.Int16():     {group: auth.OpDescribe, topic: auth.OpDescribe},
	kmsg.DescribeGroups.Int16():  {group: auth.OpDescribe},
	kmsg.ListGroups.Int16():      {group: auth.OpDescribe, filtered: true},
	kmsg.DeleteGroups.Int16():    {group: auth.OpDelete, audit: true},
	kmsg.OffsetDelete.Int16():    {group: auth.OpDelete, topic: auth.OpRead, audit: true},
	// Share groups (KIP-932), as Kafka authorizes them.
	kmsg.ShareGroupHeartbeat.Int16():       {group: auth.OpRead, topic: auth.OpDescribe},
	kmsg.ShareGroupDescribe.Int16():        {group: auth.OpDescribe},
	kmsg.DescribeShareGroupOffsets.Int16(): {group: auth.OpDescribe, topic: auth.OpDescribe},
	kmsg.AlterShareGroupOffsets.Int16():    {group: auth.OpRead, topic: auth.OpRead, audit: true},
	kmsg.DeleteShareGroupOffsets.Int16():   {group: auth.OpDelete, topic: auth.OpRead, audit: true},
	kmsg.ShareFetch.Int16():                {group: auth.OpRead, topic: auth.OpRead},
	kmsg.ShareAcknowledge.Int16():          {group: auth.OpRead, topic: auth.OpRead},
}

// may reports whether the request's principal holds op on resource r
// named name; an operation of 0 (the key's row names none) is refused.
func (rc *reqCtx) may(op auth.Operation, r auth.ResourceType, name string) bool {
	s := rc.c.s
	if !s.required() {
		return true
	}
	if op == 0 {
		return false
	}
	return s.authz.Allowed(rc.c.principal, auth.Permission{Op: op, Resource: r, Name: name})
}

// mayTopic reports whether the request may use topic as its key needs.
func (rc *reqCtx) mayTopic(topic string) bool {
	return rc.may(authzTable[rc.key].topic, auth.ResourceTopic, topic)
}

// mayGroup reports whether the request may use group as its key needs.
func (rc *reqCtx) mayGroup(group string) bool {
	return rc.may(authzTable[rc.key].group, auth.ResourceGroup, group)
}

// mayCluster reports whether the request may act on the cluster as its
// key needs.
func (rc *reqCtx) mayCluster() bool {
	return rc.may(authzTable[rc.key].cluster, auth.ResourceCluster, auth.ClusterName)
}

// mayAutoCreate reports whether a Metadata request may create topic: it
// needs what CreateTopics needs, create on the topic (as Kafka asks).
func (rc *reqCtx) mayAutoCreate(topic string) bool {
	return rc.may(authzTable[kmsg.CreateTopics.Int16()].topic, auth.ResourceTopic, topic)
}

// audit writes the audit line of one resource an admin request changed
// (its key's row has audit), like the Connect API's: the request, the
// principal and how it authenticated, the client's address, a summary
// of the resource's change (names and settings, never record data), and
// the outcome, "ok" or the Kafka error's name in lower case, with its
// message; on the leader, for a request another node handed it, that
// node's id.
func (rc *reqCtx) audit(resource []slog.Attr, code int16, msg string) {
	c := rc.c
	outcome := "ok"
	if code != errNone {
		outcome = strings.ToLower(errorName(code))
	}
	attrs := []slog.Attr{
		slog.String("procedure", "kafka/"+apiName(rc.key)),
		slog.String("principal", c.principal.String()),
		slog.String("auth", c.method),
		slog.String("remote", c.nc.RemoteAddr().String()),
		slog.Attr{Key: "request", Value: slog.GroupValue(resource...)},
		slog.String("outcome", outcome),
	}
	if c.broker != "" {
		// A request another node handed to this one (share_forward.go).
		attrs = append(attrs, slog.String("forwarded_by", c.broker))
	}
	if code != errNone {
		if msg == "" {
			msg = errorName(code)
		}
		attrs = append(attrs, slog.String("error", msg))
	}
	c.s.auditLog.LogAttrs(c.ctx, slog.LevelInfo, "audit", attrs...)
}

// admitProduce applies the produce quota to a request of n record batch
// bytes: it returns the throttle to answer with, or refused when the
// principal's bucket is in debt (nothing is written; the throttle is the
// time the debt takes to pay back).
func (rc *reqCtx) admitProduce(n int64) (throttle int32, refused string) {
	q := rc.c.s.quotas
	after, ok := q.Admit(quota.Produce, rc.c.principal, n)
	if !ok {
		return throttleMillis(after), fmt.Sprintf("%s is over its produce quota of %.0f bytes/s; retry after %v", rc.c.principal, q.Rate(quota.Produce), after.Round(time.Millisecond))
	}
	return throttleMillis(after), ""
}

// admitFetch applies the fetch quota before a fetch: false (with the
// throttle) while the principal's bucket is in debt.
func (rc *reqCtx) admitFetch() (int32, bool) {
	after, ok := rc.c.s.quotas.Admit(quota.Fetch, rc.c.principal, 0)
	return throttleMillis(after), ok
}

// tookFetch takes the n batch bytes a fetch served from the fetch quota
// and returns the throttle to answer with.
func (rc *reqCtx) tookFetch(n int64) int32 {
	return throttleMillis(rc.c.s.quotas.Take(quota.Fetch, rc.c.principal, n))
}

// throttleMillis is a wait as throttle_time_ms (at most a minute).
func throttleMillis(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(max(min(d, time.Minute).Milliseconds(), 1))
}
