package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueCreateCmd(opts *globalOpts) *cobra.Command {
	var (
		f       queueConfigFlags
		fromEnd bool
		output  string
	)
	cmd := &cobra.Command{
		Use:   "create TOPIC GROUP",
		Short: "Create a queue group on a topic",
		Example: `  logctl queue create payments workers --lease 30s --max-deliveries 5
  logctl queue create payments workers --backoff-base 1s --backoff-max 1m --age-limit 24h`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				cfg, err := c.CreateQueueGroup(cmd.Context(), args[0], args[1], f.config(), fromEnd)
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, cfg)
				}
				fmt.Fprintf(opts.stdout, "created queue group %s on %s\n", args[1], args[0])
				return printQueueConfig(opts.stdout, cfg)
			})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&fromEnd, "from-end", false, "work only records appended from now on")
	addOutputFlag(cmd, &output)
	return cmd
}
