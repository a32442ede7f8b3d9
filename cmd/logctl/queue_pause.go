package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// newQueuePauseCmd builds `queue pause` (paused=true) or `queue resume`.
func newQueuePauseCmd(opts *globalOpts, paused bool) *cobra.Command {
	use, short, verb := "pause TOPIC GROUP", "Pause a queue group: no deliveries; leases and counts kept (for a downstream outage)", "paused"
	if !paused {
		use, short, verb = "resume TOPIC GROUP", "Resume a paused queue group", "resumed"
	}
	var output string
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: "  logctl queue " + verb[:len(verb)-1] + " orders workers", // pause or resume
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				changed, err := c.PauseQueueGroup(cmd.Context(), args[0], args[1], paused)
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, map[string]any{"topic": args[0], "group": args[1], "paused": paused, "changed": changed})
				}
				if !changed {
					verb = "already " + verb
				}
				fmt.Fprintf(opts.stdout, "Queue group %s on %s %s\n", args[1], args[0], verb)
				return nil
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
