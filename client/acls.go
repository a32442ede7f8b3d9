package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// The names of an ACL's fields, as the API writes them (docs/security.md).
const (
	// Resource types.
	ResourceTopic   = "topic"
	ResourceGroup   = "group" // a consumer group, by its name
	ResourceQueue   = "queue" // a queue group, by its group name
	ResourceCluster = "cluster"
	ResourceToken   = "token" // the tokens of a user, by the user's name
	ResourceACL     = "acl"   // the ACLs of a resource type, by the type's name

	// ClusterName is the name of the one cluster resource.
	ClusterName = "logd"

	// Pattern types.
	PatternLiteral = "literal" // the name exactly; the literal name "*" is every name
	PatternPrefix  = "prefix"  // every name that starts with the ACL's name

	// Operations. An allowed read, write, delete or alter implies describe;
	// all is every operation.
	OpRead     = "read"
	OpWrite    = "write"
	OpCreate   = "create"
	OpDelete   = "delete"
	OpAlter    = "alter"
	OpDescribe = "describe"
	OpAdmin    = "admin"
	OpAll      = "all"

	// Effects. Deny wins over allow.
	EffectAllow = "allow"
	EffectDeny  = "deny"

	// AnyPrincipal in an ACL matches every principal, the anonymous one
	// included.
	AnyPrincipal = "*"
)

// ACL is one rule in Kafka's model: Principal may (EffectAllow) or may not
// (EffectDeny) do Operation on the resources of type Resource whose name
// matches Name under Pattern. Fields hold the names above; the server
// validates them.
type ACL struct {
	// Principal is "User:NAME", "Node:ID" or AnyPrincipal.
	Principal string `json:"principal"`
	Resource  string `json:"resource"`
	Pattern   string `json:"pattern"`
	Name      string `json:"name"`
	Operation string `json:"operation"`
	Effect    string `json:"effect"`
}

// String renders the ACL as a sentence: `allow User:alice write on topic
// literal "orders"`.
func (a ACL) String() string {
	return fmt.Sprintf("%s %s %s on %s %s %q", a.Effect, a.Principal, a.Operation, a.Resource, a.Pattern, a.Name)
}

func (a ACL) toProto() *logdv1.ACL {
	return &logdv1.ACL{Principal: a.Principal, Resource: a.Resource, Pattern: a.Pattern, Name: a.Name, Operation: a.Operation, Effect: a.Effect}
}

func aclFromProto(a *logdv1.ACL) ACL {
	return ACL{Principal: a.GetPrincipal(), Resource: a.GetResource(), Pattern: a.GetPattern(), Name: a.GetName(), Operation: a.GetOperation(), Effect: a.GetEffect()}
}

func aclsFromProto(in []*logdv1.ACL) []ACL {
	out := make([]ACL, 0, len(in))
	for _, a := range in {
		out = append(out, aclFromProto(a))
	}
	return out
}

// ACLFilter selects ACLs by their fields: an empty field matches every
// value, a set one only ACLs with exactly that value (a filter Name
// "orders" does not select the prefix ACL "ord").
type ACLFilter struct {
	Principal string `json:"principal,omitempty"`
	Resource  string `json:"resource,omitempty"`
	Pattern   string `json:"pattern,omitempty"`
	Name      string `json:"name,omitempty"`
	Operation string `json:"operation,omitempty"`
	Effect    string `json:"effect,omitempty"`
}

// IsEmpty reports whether the filter selects every ACL.
func (f ACLFilter) IsEmpty() bool { return f == ACLFilter{} }

func (f ACLFilter) toProto() *logdv1.ACLFilter {
	return &logdv1.ACLFilter{Principal: f.Principal, Resource: f.Resource, Pattern: f.Pattern, Name: f.Name, Operation: f.Operation, Effect: f.Effect}
}

// CreateACLs adds ACLs and returns how many were new (ACLs already present
// are kept once). It fails with ErrInvalidArgument, adding none, when any
// ACL is invalid. It is retried only when nothing can have been written
// (see RetryPolicy).
func (c *Client) CreateACLs(ctx context.Context, acls []ACL) (created int, err error) {
	req := &logdv1.CreateACLsRequest{}
	for _, a := range acls {
		req.Acls = append(req.Acls, a.toProto())
	}
	err = c.do(ctx, "CreateACLs", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.CreateACLs(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		created = int(resp.Msg.GetCreated())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", count(len(acls), "ACL"), err)
	}
	return created, nil
}

// ListACLs returns the ACLs that filter selects (the zero filter: every
// ACL), in the server's order.
func (c *Client) ListACLs(ctx context.Context, filter ACLFilter) ([]ACL, error) {
	var out []ACL
	err := c.do(ctx, "ListACLs", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListACLs(ctx, connect.NewRequest(&logdv1.ListACLsRequest{Filter: filter.toProto()}))
		if err != nil {
			return fromRPC(err)
		}
		out = aclsFromProto(resp.Msg.GetAcls())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list ACLs: %w", err)
	}
	return out, nil
}

// DeleteACLs removes the ACLs that filter selects and returns them; with
// dryRun it removes nothing and returns what it would remove. The zero
// filter is refused (ErrInvalidArgument, without a call), so that no call
// removes every ACL by accident. A removal is retried only when nothing
// can have been written; a dry run on every retryable error.
func (c *Client) DeleteACLs(ctx context.Context, filter ACLFilter, dryRun bool) ([]ACL, error) {
	if filter.IsEmpty() {
		return nil, fmt.Errorf("delete ACLs: the filter selects every ACL; set at least one field: %w", ErrInvalidArgument)
	}
	rc := retryUnwritten
	if dryRun {
		rc = retryAny
	}
	var out []ACL
	err := c.do(ctx, "DeleteACLs", rc, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.DeleteACLs(ctx, connect.NewRequest(&logdv1.DeleteACLsRequest{Filter: filter.toProto(), DryRun: dryRun}))
		if err != nil {
			return fromRPC(err)
		}
		out = aclsFromProto(resp.Msg.GetAcls())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete ACLs: %w", err)
	}
	return out, nil
}

// count is "1 noun" or "n nouns".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
