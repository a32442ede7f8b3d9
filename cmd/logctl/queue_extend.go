package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueExtendCmd(opts *globalOpts) *cobra.Command {
	var (
		lease  time.Duration
		output string
	)
	cmd := &cobra.Command{
		Use:     "extend TOPIC GROUP TOKEN...",
		Short:   "Extend the leases of deliveries to now + --lease",
		Example: "  logctl queue extend orders workers TOKEN --lease 5m",
		Args:    cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				rs, err := c.Extend(cmd.Context(), args[0], args[1], lease, args[2:]...)
				if rs != nil {
					if perr := printTokenResults(opts.stdout, output, rs); perr != nil {
						return perr
					}
				}
				return tokenCallError(rs != nil, err)
			})
		},
	}
	cmd.Flags().DurationVar(&lease, "lease", 0, "new lease from now (default: the group's)")
	addOutputFlag(cmd, &output)
	return cmd
}
