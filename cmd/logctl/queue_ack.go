package main

import (
	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueAckCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "ack TOPIC GROUP TOKEN...",
		Short:   "Acknowledge deliveries (finish their records)",
		Example: "  # TOKEN is a delivery token printed by logctl queue claim\n  logctl queue ack orders workers TOKEN",
		Args:    cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				rs, err := c.Ack(cmd.Context(), args[0], args[1], args[2:]...)
				if rs != nil {
					if perr := printTokenResults(opts.stdout, output, rs); perr != nil {
						return perr
					}
				}
				return tokenCallError(rs != nil, err)
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
