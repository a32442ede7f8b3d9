package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newTopicListCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			topics, err := c.ListTopics(cmd.Context())
			if err != nil {
				return err
			}
			if output == outputJSON {
				if topics == nil {
					topics = []client.Topic{}
				}
				return writeJSON(opts.stdout, topics)
			}
			tw := newTable(opts.stdout)
			fmt.Fprintln(tw, "NAME\tPARTITIONS\tCREATED")
			for _, t := range topics {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Name, t.Partitions, formatTime(t.Created))
			}
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
