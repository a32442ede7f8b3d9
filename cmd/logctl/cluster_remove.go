package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newClusterRemoveCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove NODE",
		Short: "Remove a node from the cluster",
		Long: `Removes NODE from the Raft configuration and forgets its address. A removed
node never acknowledges a write again. To bring its machine back, wipe its
data directory and join it under a new id.`,
		Example: `  logctl cluster remove n3`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.RemoveNode(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(opts.stdout, "removed %s\n", args[0])
			return nil
		},
	}
	return cmd
}
