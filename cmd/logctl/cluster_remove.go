package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newClusterRemoveCmd(opts *globalOpts) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove NODE",
		Short: "Remove a node from the cluster",
		Long: `Removes NODE from the Raft configuration and forgets its address. A removed
node never acknowledges a write again. To bring its machine back, wipe its
data directory and join it under a new id.

With data groups, a node they still place replicas on is refused: drain it
first ('logctl cluster drain NODE', then wait until no group lists it), so
no group loses a replica before another has it. --force removes it anyway
(a dead node): its replicas then go to the other nodes.`,
		Example: `  logctl cluster remove n3
  logctl cluster remove n3 --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			remove := c.RemoveNode
			if force {
				remove = c.ForceRemoveNode
			}
			if err := remove(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(opts.stdout, "removed %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove a node data groups still place replicas on")
	return cmd
}
