package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newGroupListCmd(opts *globalOpts) *cobra.Command {
	return newListCmd(opts, "List consumer groups with their state", "  logctl group list\n  logctl group list -o json",
		"GROUP\tSTATE\tMEMBERS\tGENERATION\tTOPICS",
		(*client.Client).ListGroups,
		func(g client.GroupSummary) string {
			return fmt.Sprintf("%s\t%s\t%d\t%d\t%s", g.Group, g.State, g.Members, g.Generation, strings.Join(g.Topics, ","))
		})
}
