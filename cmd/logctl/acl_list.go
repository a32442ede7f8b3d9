package main

import (
	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newACLListCmd(opts *globalOpts) *cobra.Command {
	var (
		f      aclFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "list [filters]",
		Short: "List ACLs, all or those the filters select",
		Long: `List ACLs. Each filter flag narrows the list to ACLs with exactly that
field: --topic ord lists the ACLs named "ord" (literal or prefix), not the
prefix ACLs that cover "orders".`,
		Example: `  logctl acl list
  logctl acl list --principal alice
  logctl acl list --topic orders --deny -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			filter, err := f.filter(cmd)
			if err != nil {
				return err
			}
			return opts.withClient(output, func(c *client.Client) error {
				acls, err := c.ListACLs(cmd.Context(), filter)
				if err != nil {
					return err
				}
				if output != outputText {
					if acls == nil {
						acls = []client.ACL{}
					}
					return writeData(opts.stdout, output, acls)
				}
				return printACLs(opts.stdout, acls)
			})
		},
	}
	f.addFilterFlags(cmd.Flags())
	addOutputFlag(cmd, &output)
	return cmd
}
