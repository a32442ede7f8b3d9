package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// aclAddResult is what acl add prints with --output json.
type aclAddResult struct {
	ACLs   []client.ACL `json:"acls"`
	DryRun bool         `json:"dry_run"`
	// Created counts the ACLs that were new (0 in a dry run).
	Created int `json:"created"`
	// MatchingTopics, for topic ACLs in a dry run, are the existing topics
	// they cover; null otherwise.
	MatchingTopics []string `json:"matching_topics"`
}

func newACLAddCmd(opts *globalOpts) *cobra.Command {
	var (
		f      aclFlags
		dryRun bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "add --principal P (--topic T | --group G | --queue Q | --cluster | --token-for USER | --acl TYPE) --operation OP[,OP...]",
		Short: "Add ACLs: allow (or --deny) principals operations on a resource",
		Long: `Add one ACL per principal and operation on one resource. With --dry-run
nothing changes: the ACLs are printed and, for topic ACLs, the existing
topics they would cover.`,
		Example: `  logctl acl add --principal User:alice --topic orders --operation read,write
  logctl acl add --principal alice --topic ord --prefix --operation read --dry-run
  logctl acl add --principal '*' --topic audit --operation write --deny
  logctl acl add --principal ops --cluster --operation admin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			acls, err := f.acls(cmd)
			if err != nil {
				return err
			}
			return opts.withClient(output, func(c *client.Client) error {
				res := aclAddResult{ACLs: acls, DryRun: dryRun}
				if dryRun {
					if acls[0].Resource == client.ResourceTopic {
						res.MatchingTopics = matchingTopics(cmd, opts, c, acls[0])
					}
				} else if res.Created, err = c.CreateACLs(cmd.Context(), acls); err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, res)
				}
				if err := printACLs(opts.stdout, acls); err != nil {
					return err
				}
				if res.MatchingTopics != nil {
					list := "none"
					if len(res.MatchingTopics) > 0 {
						list = strings.Join(res.MatchingTopics, ", ")
					}
					fmt.Fprintf(opts.stdout, "\nExisting topics matched (%d): %s\n", len(res.MatchingTopics), list)
				}
				if dryRun {
					opts.logf("dry run: nothing changed; run without --dry-run to add %s", count(len(acls), "ACL"))
				} else {
					opts.logf("added %s (%d new)", count(len(acls), "ACL"), res.Created)
				}
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.principals, "principal", nil, "who the ACL is for: User:NAME, Node:ID, NAME (a user) or * (everyone); repeatable or comma-separated")
	fl.StringSliceVar(&f.operations, "operation", nil, "operations, comma-separated: "+strings.Join(aclOperations(), ", "))
	f.addResourceFlags(fl, "on")
	fl.BoolVar(&dryRun, "dry-run", false, "print what would be added, and the existing topics it covers, without adding it")
	_ = cmd.MarkFlagRequired("principal")
	_ = cmd.MarkFlagRequired("operation")
	addOutputFlag(cmd, &output)
	return cmd
}

// acls returns the ACLs the add flags describe: one per principal and
// operation, in the order given, without repeats.
func (f *aclFlags) acls(cmd *cobra.Command) ([]client.ACL, error) {
	typ, name, err := f.selected(cmd)
	if err != nil {
		return nil, err
	}
	if typ == "" {
		return nil, usagef("give the resource: one of --topic, --group, --queue, --cluster, --token-for, --acl")
	}
	pattern, err := f.patternType(typ, name)
	if err != nil {
		return nil, err
	}
	effect := client.EffectAllow
	if f.deny {
		effect = client.EffectDeny
	}
	var principals, ops []string
	for _, p := range f.principals {
		n, err := normalizePrincipal(p)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(principals, n) {
			principals = append(principals, n)
		}
	}
	for _, o := range f.operations {
		op, err := parseOperation(o)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	if len(principals) == 0 || len(ops) == 0 {
		return nil, usagef("give --principal and --operation")
	}
	var out []client.ACL
	for _, p := range principals {
		for _, op := range ops {
			out = append(out, client.ACL{Principal: p, Resource: typ, Pattern: pattern, Name: name, Operation: op, Effect: effect})
		}
	}
	return out, nil
}

// matchingTopics returns the existing topics a topic ACL's pattern covers
// (never nil). A failure to list topics is reported and gives none: it
// does not fail a dry run.
func matchingTopics(cmd *cobra.Command, opts *globalOpts, c *client.Client, a client.ACL) []string {
	topics, err := c.ListTopics(cmd.Context())
	if err != nil {
		opts.logf("cannot show the topics the ACLs match: %v", err)
		return []string{}
	}
	out := []string{}
	for _, t := range topics {
		if aclCovers(a, t.Name) {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}

// aclCovers reports whether the ACL's pattern covers a resource name, as
// docs/security.md defines it: a prefix covers the names that start with
// it, a literal its own name, and the literal "*" every name.
func aclCovers(a client.ACL, name string) bool {
	if a.Pattern == client.PatternPrefix {
		return strings.HasPrefix(name, a.Name)
	}
	return a.Name == "*" || a.Name == name
}
