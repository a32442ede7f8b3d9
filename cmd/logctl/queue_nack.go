package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueNackCmd(opts *globalOpts) *cobra.Command {
	var (
		permanent bool
		reason    string
		delay     time.Duration
		output    string
	)
	cmd := &cobra.Command{
		Use:   "nack TOPIC GROUP TOKEN...",
		Short: "Fail deliveries: retry after a backoff, or --permanent to dead-letter",
		Example: `  logctl queue nack payments workers TOKEN --reason "upstream timeout"
  logctl queue nack payments workers TOKEN --permanent --reason "negative amount"`,
		Args: cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				nacks := make([]client.Nack, len(args)-2)
				for i, tok := range args[2:] {
					nacks[i] = client.Nack{Token: tok, Permanent: permanent, Error: reason}
					if cmd.Flags().Changed("delay") {
						d := delay
						nacks[i].Delay = &d
					}
				}
				rs, err := c.Nack(cmd.Context(), args[0], args[1], nacks...)
				if rs != nil {
					if perr := printTokenResults(opts.stdout, output, rs); perr != nil {
						return perr
					}
				}
				return tokenCallError(rs != nil, err)
			})
		},
	}
	cmd.Flags().BoolVar(&permanent, "permanent", false, "dead-letter at once (reason rejected)")
	cmd.Flags().StringVar(&reason, "reason", "", "the failure, kept as the record's last error")
	cmd.Flags().DurationVar(&delay, "delay", 0, "retry after this delay instead of the group's backoff")
	addOutputFlag(cmd, &output)
	return cmd
}
