package main

import "github.com/spf13/cobra"

func newTopicCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter and delete topics",
	}
	cmd.AddCommand(
		newTopicCreateCmd(opts),
		newTopicListCmd(opts),
		newTopicDescribeCmd(opts),
		newTopicAlterCmd(opts),
		newTopicDeleteCmd(opts),
	)
	return cmd
}
