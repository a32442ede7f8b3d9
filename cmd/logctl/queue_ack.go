package main

import (
	"github.com/spf13/cobra"
)

func newQueueAckCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ack TOPIC GROUP TOKEN...",
		Short: "Acknowledge deliveries (finish their records)",
		Args:  cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			rs, err := c.Ack(cmd.Context(), args[0], args[1], args[2:]...)
			if rs != nil {
				if perr := printTokenResults(opts.stdout, output, rs); perr != nil {
					return perr
				}
			}
			return tokenCallError(rs != nil, err)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
