package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newClusterMovesCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "moves",
		Short: "List the data group replica moves in progress",
		Long: `Lists the data group replica moves in progress, as the node asked knows
them from the table of data groups (any node answers: the table is
replicated). The meta leader marks a group as moving when it changes the
group's replicas (balancing, a join, a drain, a removal, a node not heard
from) and clears the mark once the group's voters are its replicas.

ADDED and REMOVED are the replicas the group gains and loses, REASON why,
AGE how long ago the move began. VOTERS are the voters of the group's
configuration as its leader (or, failing it, another replica) reports
them, asked for at most 2 seconds per group, and STATE what that means:
"adding n4" while n4 is not a voter yet (it is being added or catches
up), "removing n2" while n2 still votes, "done" when the voters are the
replicas (the mark goes at the meta leader's next pass), "unknown" when no
replica answered in time.

Watch a drain or a join with it (docs/operations.md, "Data groups");
--output json gives scripts every field, the voters' source included.`,
		Example: `  logctl cluster moves
  # during a drain, every 5 seconds: watch -n 5 logctl cluster moves
  logctl cluster moves --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				mv, err := c.ListMoves(cmd.Context())
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, mv)
				}
				return writeMoves(opts, mv)
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// writeMoves prints the moves as a table, or says there are none.
func writeMoves(opts *globalOpts, mv client.Moves) error {
	if len(mv.Moves) == 0 {
		fmt.Fprintln(opts.stdout, "no replica moves in progress")
		return nil
	}
	tw := newTable(opts.stdout)
	fmt.Fprintln(tw, "GROUP\tADDED\tREMOVED\tREASON\tAGE\tVOTERS\tSTATE")
	for _, m := range mv.Moves {
		voters := "-"
		if m.VotersKnown() {
			voters = strings.Join(m.Voters, ",")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Group, dash(strings.Join(m.Added, ",")), dash(strings.Join(m.Removed, ",")),
			m.Reason, humanDuration(max(m.Age, 0).Round(time.Second)), voters, moveState(m))
	}
	return tw.Flush()
}

// moveState says where a move stands from the group's voters: which added
// replicas are not voters yet, which removed ones still are.
func moveState(m client.ReplicaMove) string {
	if !m.VotersKnown() {
		if m.VotersError == "" {
			return "unknown"
		}
		return "unknown: " + m.VotersError
	}
	var parts []string
	adding := slices.DeleteFunc(slices.Clone(m.Added), func(id string) bool { return slices.Contains(m.AddedVoters, id) })
	if len(adding) > 0 {
		parts = append(parts, "adding "+strings.Join(adding, ","))
	}
	if len(m.RemovedVoters) > 0 {
		parts = append(parts, "removing "+strings.Join(m.RemovedVoters, ","))
	}
	if len(parts) == 0 {
		return "done"
	}
	return strings.Join(parts, "; ")
}
