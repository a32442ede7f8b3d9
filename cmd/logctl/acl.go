package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logd-dev/logd/client"
)

func newACLCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, list and remove ACLs",
		Long: `ACLs say which principal may do what, in Kafka's model: a principal
(User:NAME, Node:ID, or * for everyone), a resource (--topic, --group,
--queue, --cluster, --token-for, --acl), a pattern (the literal name, where
* is every name, or with --prefix every name starting with it), an operation
(read, write, create, delete, alter, describe, admin, all) and an effect
(allow, or --deny). Deny wins over allow; without a matching ACL a call is
refused, except for superusers. An allowed read, write, delete or alter
implies describe.`,
	}
	cmd.AddCommand(
		newACLAddCmd(opts),
		newACLListCmd(opts),
		newACLRemoveCmd(opts),
	)
	return cmd
}

// aclOperations returns the operation names, in the order help lists
// them.
func aclOperations() []string {
	return []string{client.OpRead, client.OpWrite, client.OpCreate, client.OpDelete, client.OpAlter, client.OpDescribe, client.OpAdmin, client.OpAll}
}

// aclResourceTypes returns the resource type names.
func aclResourceTypes() []string {
	return []string{client.ResourceTopic, client.ResourceGroup, client.ResourceQueue, client.ResourceCluster, client.ResourceToken, client.ResourceACL}
}

// resourceFlag is one flag that selects a resource: its name, the resource
// type, and the name it takes ("" for --cluster, which names the one
// cluster).
type resourceFlag struct {
	flag, resource string
}

// resourceFlags returns the flags that select a resource, with their
// type.
func resourceFlags() []resourceFlag {
	return []resourceFlag{
		{"topic", client.ResourceTopic},
		{"group", client.ResourceGroup},
		{"queue", client.ResourceQueue},
		{"cluster", client.ResourceCluster},
		{"token-for", client.ResourceToken},
		{"acl", client.ResourceACL},
	}
}

// aclFlags are the flags that describe ACLs, for add and for the filters of
// list and remove.
type aclFlags struct {
	principals []string
	names      map[string]*string // by resource flag, but cluster
	cluster    bool
	prefix     bool
	deny       bool
	operations []string
	// Filters only.
	resource string
	pattern  string
	effect   string
}

// addResourceFlags adds the principal, resource, --prefix and --deny flags.
func (f *aclFlags) addResourceFlags(fs *pflag.FlagSet, verb string) {
	f.names = map[string]*string{}
	for _, rf := range resourceFlags() {
		if rf.resource == client.ResourceCluster {
			fs.BoolVar(&f.cluster, rf.flag, false, verb+" the cluster")
			continue
		}
		v := new(string)
		f.names[rf.flag] = v
		fs.StringVar(v, rf.flag, "", fmt.Sprintf("%s %s NAME (* for every one)", verb, resourceHelp(rf.resource)))
	}
	fs.BoolVar(&f.prefix, "prefix", false, "the name is a prefix: every resource whose name starts with it")
	fs.BoolVar(&f.deny, "deny", false, "a denying ACL (default: allowing)")
}

func resourceHelp(resource string) string {
	switch resource {
	case client.ResourceGroup:
		return "the consumer group"
	case client.ResourceQueue:
		return "the queue group"
	case client.ResourceToken:
		return "the tokens of user"
	case client.ResourceACL:
		return "the ACLs of resource type"
	}
	return "the " + resource
}

// selected returns the resource the flags select: its type and name, or
// "" when no resource flag is given. Giving several is an error.
func (f *aclFlags) selected(cmd *cobra.Command) (typ, name string, err error) {
	var given []string
	for _, rf := range resourceFlags() {
		if !cmd.Flags().Changed(rf.flag) {
			continue
		}
		given = append(given, "--"+rf.flag)
		typ = rf.resource
		if rf.resource == client.ResourceCluster {
			name = client.ClusterName
			continue
		}
		name = *f.names[rf.flag]
		if name == "" {
			return "", "", usagef("--%s: empty name (use * for every name)", rf.flag)
		}
	}
	switch {
	case len(given) > 1:
		return "", "", usagef("give one resource, not %s", strings.Join(given, " and "))
	case typ == client.ResourceACL && name != "*" && !slices.Contains(aclResourceTypes(), name):
		return "", "", usagef("--acl %q: name a resource type (%s) or *", name, strings.Join(aclResourceTypes(), ", "))
	}
	return typ, name, nil
}

// patternType returns the pattern type the flags select (add: literal unless
// --prefix).
func (f *aclFlags) patternType(typ, name string) (string, error) {
	if !f.prefix {
		return client.PatternLiteral, nil
	}
	switch {
	case typ == client.ResourceCluster:
		return "", usagef("--prefix does not apply to --cluster (there is one cluster)")
	case name == "*":
		return "", usagef("--prefix with name *: for every name, give the literal name * without --prefix")
	}
	return client.PatternPrefix, nil
}

// normalizePrincipal returns a principal as ACLs write it: "*",
// "User:NAME" for a bare NAME, "User:NAME" or "Node:ID" as given.
func normalizePrincipal(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == client.AnyPrincipal {
		return p, nil
	}
	typ, name, ok := strings.Cut(p, ":")
	if !ok {
		typ, name = "User", p
	}
	if typ != "User" && typ != "Node" {
		return "", usagef("--principal %q: want User:NAME, Node:ID, NAME or *", p)
	}
	if name == "" || strings.ContainsAny(name, " ,:\"") {
		return "", usagef("--principal %q: the name must be non-empty, without spaces, commas, colons or quotes", p)
	}
	return typ + ":" + name, nil
}

// parseOperation checks an operation name.
func parseOperation(op string) (string, error) {
	op = strings.ToLower(strings.TrimSpace(op))
	if !slices.Contains(aclOperations(), op) {
		return "", usagef("--operation %q: want one of %s", op, strings.Join(aclOperations(), ", "))
	}
	return op, nil
}

// addFilterFlags adds the flags of an ACL filter (list, remove).
func (f *aclFlags) addFilterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.resource, "resource", "", "only ACLs on this resource type, any name ("+strings.Join(aclResourceTypes(), ", ")+")")
	fs.StringVar(&f.pattern, "pattern", "", "only ACLs with this pattern type (literal or prefix)")
	fs.StringVar(&f.effect, "effect", "", "only ACLs with this effect (allow or deny)")
	fs.StringSliceVar(&f.operations, "operation", nil, "only ACLs of this operation")
	fs.StringSliceVar(&f.principals, "principal", nil, "only ACLs of this principal (User:NAME, Node:ID, NAME or *)")
	f.addResourceFlags(fs, "only ACLs on")
}

// filter returns the ACL filter the flags describe. Each flag narrows it;
// no flag selects every ACL.
func (f *aclFlags) filter(cmd *cobra.Command) (client.ACLFilter, error) {
	var out client.ACLFilter
	switch len(f.principals) {
	case 0:
	case 1:
		p, err := normalizePrincipal(f.principals[0])
		if err != nil {
			return out, err
		}
		out.Principal = p
	default:
		return out, usagef("--principal: a filter takes one principal")
	}
	typ, name, err := f.selected(cmd)
	if err != nil {
		return out, err
	}
	out.Resource, out.Name = typ, name
	if f.resource != "" {
		if typ != "" {
			return out, usagef("give --resource or a resource flag (--%s ...), not both", resourceFlagOf(typ))
		}
		r := strings.ToLower(f.resource)
		if !slices.Contains(aclResourceTypes(), r) {
			return out, usagef("--resource %q: want one of %s", f.resource, strings.Join(aclResourceTypes(), ", "))
		}
		out.Resource = r
	}
	switch p := strings.ToLower(f.pattern); {
	case p != "" && f.prefix && p != client.PatternPrefix:
		return out, usagef("--prefix and --pattern %s disagree", f.pattern)
	case f.prefix:
		out.Pattern = client.PatternPrefix
	case p == "", p == client.PatternLiteral, p == client.PatternPrefix:
		out.Pattern = p
	default:
		return out, usagef("--pattern %q: want literal or prefix", f.pattern)
	}
	switch e := strings.ToLower(f.effect); {
	case e != "" && f.deny && e != client.EffectDeny:
		return out, usagef("--deny and --effect %s disagree", f.effect)
	case f.deny:
		out.Effect = client.EffectDeny
	case e == "", e == client.EffectAllow, e == client.EffectDeny:
		out.Effect = e
	default:
		return out, usagef("--effect %q: want allow or deny", f.effect)
	}
	switch len(f.operations) {
	case 0:
	case 1:
		op, err := parseOperation(f.operations[0])
		if err != nil {
			return out, err
		}
		out.Operation = op
	default:
		return out, usagef("--operation: a filter takes one operation")
	}
	return out, nil
}

// resourceFlagOf is the flag that selects resource type typ.
func resourceFlagOf(typ string) string {
	for _, rf := range resourceFlags() {
		if rf.resource == typ {
			return rf.flag
		}
	}
	return typ
}

// printACLs prints ACLs as a table.
func printACLs(w io.Writer, acls []client.ACL) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "PRINCIPAL\tEFFECT\tOPERATION\tRESOURCE\tPATTERN\tNAME")
	for _, a := range acls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Principal, a.Effect, a.Operation, a.Resource, a.Pattern, a.Name)
	}
	return tw.Flush()
}

// grantCommand is the logctl command line that grants principal a
// permission written as the server writes it ("write topic orders"), or ""
// when the permission is not in that form.
func grantCommand(principal, permission string) string {
	f := strings.Fields(permission)
	if principal == "" || len(f) != 3 || !slices.Contains(aclOperations(), f[0]) {
		return ""
	}
	op, typ, name := f[0], f[1], f[2]
	var resource string
	switch typ {
	case client.ResourceCluster:
		resource = "--cluster"
	case client.ResourceTopic, client.ResourceGroup, client.ResourceQueue, client.ResourceToken, client.ResourceACL:
		resource = "--" + resourceFlagOf(typ) + " " + name
	default:
		return ""
	}
	return fmt.Sprintf("logctl acl add --principal %s %s --operation %s", principal, resource, op)
}
