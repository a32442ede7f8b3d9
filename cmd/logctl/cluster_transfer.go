package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newClusterTransferCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "transfer-leadership [NODE]",
		Short: "Hand leadership to NODE, or to the most up-to-date voter",
		Example: `  logctl cluster transfer-leadership
  logctl cluster transfer-leadership n2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := ""
			if len(args) == 1 {
				target = args[0]
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			id, addr, err := c.TransferLeadership(cmd.Context(), target)
			if err != nil {
				return err
			}
			if id == "" {
				fmt.Fprintln(opts.stdout, "leadership transferred; new leader not known yet")
				return nil
			}
			fmt.Fprintf(opts.stdout, "leader is now %s (%s)\n", id, dash(addr))
			return nil
		},
	}
	return cmd
}
