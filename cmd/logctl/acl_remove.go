package main

import (
	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// aclRemoveResult is what acl remove prints with --output json.
type aclRemoveResult struct {
	// ACLs are the ACLs removed, or in a dry run those that would be.
	ACLs   []client.ACL `json:"acls"`
	DryRun bool         `json:"dry_run"`
}

func newACLRemoveCmd(opts *globalOpts) *cobra.Command {
	var (
		f      aclFlags
		dryRun bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "remove filters [--dry-run]",
		Short: "Remove the ACLs the filters select",
		Long: `Remove the ACLs that the filters select (the same flags as acl list; each
narrows the selection to ACLs with exactly that field). At least one filter
is required, so that nothing removes every ACL by accident. With --dry-run
the ACLs are printed and nothing changes.`,
		Example: `  logctl acl remove --principal alice --topic orders --dry-run
  logctl acl remove --principal alice --topic orders --operation write
  logctl acl remove --principal bob`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			filter, err := f.filter(cmd)
			if err != nil {
				return err
			}
			if filter.IsEmpty() {
				return usagef("give at least one filter (--principal, --topic, --resource, ...); use acl list to see the ACLs")
			}
			return opts.withClient(output, func(c *client.Client) error {
				// A dry run first: a filter that selects nothing writes
				// nothing.
				acls, err := c.DeleteACLs(cmd.Context(), filter, true)
				if err != nil {
					return err
				}
				if len(acls) > 0 && !dryRun {
					if acls, err = c.DeleteACLs(cmd.Context(), filter, false); err != nil {
						return err
					}
				}
				if acls == nil {
					acls = []client.ACL{}
				}
				if output != outputText {
					if err := writeData(opts.stdout, output, aclRemoveResult{ACLs: acls, DryRun: dryRun}); err != nil {
						return err
					}
				} else if len(acls) > 0 {
					if err := printACLs(opts.stdout, acls); err != nil {
						return err
					}
				}
				switch {
				case len(acls) == 0:
					opts.logf("no ACL matches the filters; nothing removed")
				case dryRun:
					opts.logf("dry run: nothing changed; run without --dry-run to remove %s", count(len(acls), "ACL"))
				default:
					opts.logf("removed %s", count(len(acls), "ACL"))
				}
				return nil
			})
		},
	}
	f.addFilterFlags(cmd.Flags())
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the ACLs that would be removed without removing them")
	addOutputFlag(cmd, &output)
	return cmd
}
