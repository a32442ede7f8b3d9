package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/logd-dev/logd/client"
	"github.com/spf13/cobra"
)

func newGroupListCmd(opts *globalOpts) *cobra.Command {
	var all bool
	cmd := newListCmd(opts, "List consumer groups with their state",
		"  logctl group list\n  logctl group list -o json\n  logctl group list --all",
		"GROUP\tSTATE\tMEMBERS\tGENERATION\tTOPICS",
		func(c *client.Client, ctx context.Context) ([]client.GroupSummary, error) {
			return c.ListGroupsWith(ctx, client.ListGroupsOptions{All: all})
		},
		func(g client.GroupSummary) string {
			return fmt.Sprintf("%s\t%s\t%d\t%d\t%s", g.Group, g.State, g.Members, g.Generation, strings.Join(g.Topics, ","))
		})
	cmd.Flags().BoolVar(&all, "all", false, "list internal groups too (a redrive job's position, logd-redrive.*)")
	return cmd
}
