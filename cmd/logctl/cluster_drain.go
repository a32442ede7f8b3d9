package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newClusterDrainCmd(opts *globalOpts) *cobra.Command {
	var undo bool
	cmd := &cobra.Command{
		Use:   "drain NODE [--undo]",
		Short: "Move a node's data group replicas to the other nodes",
		Long: `Drains NODE: the leader gives each data group replica NODE holds, and each
group it is the preferred leader of, to the other nodes (each group adds the
new replica, lets it catch up and promotes it before it drops NODE's), while
NODE keeps serving and stays a member; nothing new is placed on it. Watch
the moves with 'logctl cluster moves' (each group's move, its reason "node
NODE drained", age and progress): the drain is done when no move is left and
'logctl cluster status' lists NODE among no group's REPLICAS. --undo ends the
drain: NODE takes replicas again by balancing.

Without data groups there is nothing to drain (docs/operations.md, "Data
groups").`,
		Example: `  logctl cluster drain n3
  logctl cluster drain n3 --undo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			draining, err := c.DrainNode(cmd.Context(), args[0], undo)
			if err != nil {
				return err
			}
			what := "draining"
			if undo {
				what = "no longer draining"
			}
			list := "none"
			if len(draining) > 0 {
				list = strings.Join(draining, ", ")
			}
			fmt.Fprintf(opts.stdout, "%s %s (draining now: %s)\n", what, args[0], list)
			return nil
		},
	}
	cmd.Flags().BoolVar(&undo, "undo", false, "end the drain: the node takes replicas again by balancing")
	return cmd
}
