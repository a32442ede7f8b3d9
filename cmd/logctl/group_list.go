package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newGroupListCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List consumer groups with their state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			groups, err := c.ListGroups(cmd.Context())
			if err != nil {
				return err
			}
			if output == outputJSON {
				if groups == nil {
					groups = []client.GroupSummary{}
				}
				return writeJSON(opts.stdout, groups)
			}
			tw := newTable(opts.stdout)
			fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS\tGENERATION\tTOPICS")
			for _, g := range groups {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", g.Group, g.State, g.Members, g.Generation, strings.Join(g.Topics, ","))
			}
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
