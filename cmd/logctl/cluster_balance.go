package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newClusterBalanceCmd(opts *globalOpts) *cobra.Command {
	var (
		output string
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "balance --dry-run",
		Short: "Show the data group replica moves balancing would make",
		Long: `Balancing runs on its own: the meta leader moves data group replicas from
the node that holds the most to the one that holds the fewest while they
are more than two apart, at most logd's --max-moves at once (default 1;
--max-moves -1 switches balancing off), and hands preferred leaderships
over within groups (docs/operations.md, "Data groups"). There is nothing to
start, so this command takes --dry-run and only shows the plan.

With --dry-run the node asked computes, from the table of data groups it
applied, the steps balancing would take until the groups are balanced,
as if each move finished before the next: STEP is the meta leader's pass
(the changes of one step are proposed together), KIND "replica" (FROM's
replica of GROUP goes to TO) or "leader" (GROUP's preferred leadership
goes from FROM to TO, a replica already: no data moves). A summary gives
each placed node's replicas and preferred leaderships before and after.
Moves in progress (logctl cluster moves) finish first. When the meta leader
has other changes to make first (a node to place, a drained, removed or
silent node's replicas to move), balancing waits, and the plan says so.
Nothing changes.`,
		Example: `  logctl cluster balance --dry-run
  logctl cluster balance --dry-run --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !dryRun {
				return usagef("balancing runs on its own on the meta leader, at most logd's --max-moves replica moves at once (-1 switches it off): there is nothing to start; --dry-run shows what it would move")
			}
			return opts.withClient(output, func(c *client.Client) error {
				p, err := c.PlanBalance(cmd.Context())
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, p)
				}
				return writeBalancePlan(opts, p)
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the moves balancing would make; required: balancing runs on its own")
	addOutputFlag(cmd, &output)
	return cmd
}

// writeBalancePlan prints a balance plan: its steps, then each node's
// counts before and after.
func writeBalancePlan(opts *globalOpts, p client.BalancePlan) error {
	if p.Groups == 0 {
		fmt.Fprintln(opts.stdout, "no data groups: nothing to balance")
		return nil
	}
	moves := p.Moves()
	switch {
	case p.Blocked != "":
		fmt.Fprintf(opts.stdout, "balancing waits: %s\n", p.Blocked)
	case len(p.Steps) == 0:
		fmt.Fprintf(opts.stdout, "balanced: no replica moves (%s over %s)\n", count(p.Groups, "data group"), count(len(p.Nodes), "node"))
	default:
		fmt.Fprintf(opts.stdout, "%s and %s in %s\n", count(moves, "replica move"), count(len(p.Steps)-moves, "leadership hand-over"),
			count(p.Steps[len(p.Steps)-1].Step, "step"))
		tw := newTable(opts.stdout)
		fmt.Fprintln(tw, "STEP\tKIND\tGROUP\tFROM\tTO")
		for _, s := range p.Steps {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", s.Step, s.Kind, s.Group, s.From, s.To)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(opts.stdout)
	tw := newTable(opts.stdout)
	// Bytes once the answering node knew some group's size.
	sized := slices.ContainsFunc(p.Loads, func(l client.NodeLoad) bool { return l.BytesBefore > 0 || l.BytesAfter > 0 })
	header := "NODE\tREPLICAS BEFORE\tREPLICAS AFTER\tLEADS BEFORE\tLEADS AFTER"
	if sized {
		header += "\tBYTES BEFORE\tBYTES AFTER"
	}
	fmt.Fprintln(tw, header)
	for _, l := range p.Loads {
		node := l.Node
		if l.Draining {
			node += " (draining)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d", node, l.ReplicasBefore, l.ReplicasAfter, l.LeadsBefore, l.LeadsAfter)
		if sized {
			fmt.Fprintf(tw, "\t%s\t%s", formatBytes(l.BytesBefore), formatBytes(l.BytesAfter))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.Truncated {
		opts.logf("the plan stops after %s; balancing goes on after them", count(p.Steps[len(p.Steps)-1].Step, "step"))
	}
	if p.InProgress > 0 {
		opts.logf("%s in progress finish first (logctl cluster moves)", count(p.InProgress, "move"))
	}
	opts.logf("dry run: nothing changed; balancing runs on its own on the meta leader, logd's --max-moves at a time")
	return nil
}
