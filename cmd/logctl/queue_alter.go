package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueAlterCmd(opts *globalOpts) *cobra.Command {
	var (
		f      queueConfigFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "alter TOPIC GROUP",
		Short: "Change settings of a queue group (only the flags given)",
		Example: `  logctl queue alter payments workers --max-deliveries 10 --lease 2m
  logctl queue alter payments workers --age-limit 0`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				change := f.config()
				if cmd.Flags().Changed("age-limit") {
					if f.ageLimit < 0 {
						return usagef("--age-limit %v: want 0 (no limit) or a duration up to %v: %w", f.ageLimit, maxQueueDelay, client.ErrInvalidArgument)
					}
					if f.ageLimit == 0 {
						change.AgeLimit = -1 // an alter's 0 means unchanged; negative removes the limit
					}
				}
				cfg, err := c.AlterQueueGroup(cmd.Context(), args[0], args[1], change)
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, cfg)
				}
				fmt.Fprintf(opts.stdout, "altered queue group %s on %s\n", args[1], args[0])
				return printQueueConfig(opts.stdout, cfg)
			})
		},
	}
	f.add(cmd)
	addOutputFlag(cmd, &output)
	return cmd
}
