package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newClusterStatusCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every member: role, Raft state, term, commit and applied index, lag, feature levels",
		Long: `Asks the node for the cluster configuration, then every member for its own
status. LAG is how many entries a node's applied index is behind the highest
commit index reported. A member that does not answer is shown with its error.

Feature levels (docs/operations.md, "Rolling upgrade"): LEVEL is the level a
node registered, BUILD the level its build understands. The cluster uses what
the lowest LEVEL allows ("available"); "applied" is the highest level an
applied entry needed, below which no build can run the cluster any more. A
node whose LEVEL stays below its BUILD has not registered its new build yet.

With data groups (docs/architecture.md, "Data groups"), LEADS is how many
data groups each node leads, and a second table shows each group: the node
that leads it, its preferred leader (the first of REPLICAS, which the group
hands its leadership back to), the voters of its configuration, the
PARTITIONS placed in it and the SIZE of their logs, and LAG, the most
entries a replica that answered has applied behind the group's commit
index. A group with fewer VOTERS than REPLICAS is still adding a
replica.`,
		Example: `  logctl cluster status
  logctl cluster status --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				st, err := c.ClusterStatus(cmd.Context())
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, st)
				}
				leader := st.LeaderID
				if leader == "" {
					leader = "-"
				}
				fmt.Fprintf(opts.stdout, "Leader: %s  Term: %d\n", leader, st.Term)
				fmt.Fprintf(opts.stdout, "Feature level: applied %s, available %s (the lowest LEVEL)\n\n", level(st.AppliedLevel), level(st.ClusterLevel))
				tw := newTable(opts.stdout)
				groups := len(st.DataGroups) > 0
				head := "NODE\tAPI ADDRESS\tRAFT ADDRESS\tROLE\tSTATE\tTERM\tCOMMIT\tAPPLIED\tLAG\tREADY\tLEVEL\tBUILD"
				if groups {
					head += "\tLEADS"
				}
				fmt.Fprintln(tw, head)
				for _, n := range st.Nodes {
					state := n.State
					if n.Error != "" {
						state = "unreachable: " + n.Error
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%v\t%s\t%s",
						n.ID, dash(n.APIAddress), n.RaftAddress, n.Suffrage, state, n.Term, n.CommitIndex, n.AppliedIndex, n.Lag, n.Ready,
						level(n.FeatureLevel), level(n.BuildLevel))
					if groups {
						fmt.Fprintf(tw, "\t%d", n.LeadsGroups)
					}
					fmt.Fprintln(tw)
				}
				if err := tw.Flush(); err != nil || !groups {
					return err
				}
				fmt.Fprintf(opts.stdout, "\nData groups: %d\n", len(st.DataGroups))
				tw = newTable(opts.stdout)
				fmt.Fprintln(tw, "GROUP\tLEADER\tPREFERRED\tREPLICAS\tVOTERS\tPARTITIONS\tSIZE\tTERM\tCOMMIT\tLAG")
				for _, g := range st.DataGroups {
					pref := "-"
					if len(g.Replicas) > 0 {
						pref = g.Replicas[0]
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\n", g.ID, dash(g.Leader), pref, strings.Join(g.Replicas, ","),
						dash(strings.Join(g.Voters, ",")), g.Partitions, formatBytes(g.Bytes), g.Term, g.CommitIndex, g.Lag)
				}
				return tw.Flush()
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// level prints a feature level, "-" for 0 (not reported).
func level(l uint32) string {
	if l == 0 {
		return "-"
	}
	return fmt.Sprint(l)
}
