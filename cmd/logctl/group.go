package main

import "github.com/spf13/cobra"

func newGroupCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, delete consumer groups and reset their offsets",
		Long: `Consumer groups read topics independently, each from its own committed
offsets (the next offset to read). Members join with 'logctl consume --group'
or the Go client; the server assigns them partitions.`,
	}
	cmd.AddCommand(
		newGroupListCmd(opts),
		newGroupDescribeCmd(opts),
		newGroupDeleteCmd(opts),
		newGroupResetOffsetsCmd(opts),
	)
	return cmd
}
