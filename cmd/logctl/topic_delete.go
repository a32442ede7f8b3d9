package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newTopicDeleteCmd(opts *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a topic and all its data",
		Example: `  logctl topic delete orders`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DeleteTopic(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(opts.stdout, "deleted topic %s\n", args[0])
			return err
		},
	}
}
