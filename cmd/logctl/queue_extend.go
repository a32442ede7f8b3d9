package main

import (
	"time"

	"github.com/spf13/cobra"
)

func newQueueExtendCmd(opts *globalOpts) *cobra.Command {
	var (
		lease  time.Duration
		output string
	)
	cmd := &cobra.Command{
		Use:   "extend TOPIC GROUP TOKEN...",
		Short: "Extend the leases of deliveries to now + --lease",
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
			rs, err := c.Extend(cmd.Context(), args[0], args[1], lease, args[2:]...)
			if rs != nil {
				if perr := printTokenResults(opts.stdout, output, rs); perr != nil {
					return perr
				}
			}
			return tokenCallError(rs != nil, err)
		},
	}
	cmd.Flags().DurationVar(&lease, "lease", 0, "new lease from now (default: the group's)")
	addOutputFlag(cmd, &output)
	return cmd
}
