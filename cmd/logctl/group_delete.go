package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newGroupDeleteCmd(opts *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "delete GROUP",
		Short:   "Delete a consumer group and its committed offsets",
		Long:    `Delete a consumer group without live members, with its committed offsets.`,
		Example: `  logctl group delete billing`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DeleteGroup(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(opts.stdout, "deleted group %s\n", args[0])
			return nil
		},
	}
}
