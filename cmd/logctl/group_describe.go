package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newGroupDescribeCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state, members, committed offsets and lag",
		Long: `Show a consumer group: its state (empty, stable, rebalancing), generation,
members with their partitions, and per partition the committed offset, the
log's bounds, the lag in records and in time (age of the oldest record not
yet committed), the owner, and records skipped by the reset policy after
retention passed the committed offset.

Members are logd's own (PROTOCOL logd: logctl consume --group, the Go
client's group consumer) or Kafka clients (PROTOCOL kafka), with their
client id and host, which the leader's Kafka group coordinator holds in
its memory (a follower asks the leader for them).`,
		Example: `  logctl group describe billing
  logctl group describe billing -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				d, err := c.DescribeGroup(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if output != outputText {
					tree, err := groupTree(d)
					if err != nil {
						return err
					}
					return writeTree(opts.stdout, output, tree)
				}
				return printGroup(opts, d)
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// groupTree is d's structured form, in which a partition with nothing
// committed has committed_offset null, as the text's "-" says, instead of
// the client's -1.
func groupTree(d client.GroupDescription) (any, error) {
	tree, err := toTree(d)
	if err != nil {
		return nil, err
	}
	for _, f := range tree.(object) {
		if f.name != "partitions" {
			continue
		}
		for _, p := range f.value.([]any) {
			for i, pf := range p.(object) {
				if pf.name == "committed_offset" && pf.value == json.Number("-1") {
					p.(object)[i].value = nil
				}
			}
		}
	}
	return tree, nil
}

func printGroup(opts *globalOpts, d client.GroupDescription) error {
	tw := newTable(opts.stdout)
	fmt.Fprintf(tw, "Group:\t%s\n", d.Group)
	fmt.Fprintf(tw, "State:\t%s\n", d.State)
	fmt.Fprintf(tw, "Generation:\t%d\n", d.Generation)
	fmt.Fprintf(tw, "Rebalances:\t%d\n", d.Rebalances)
	fmt.Fprintf(tw, "Offset resets:\t%d\n", d.OffsetResets)
	if d.Home != 0 {
		// A group kept in a data group (docs/architecture.md, "Consumer
		// groups"); the meta group's are not marked.
		fmt.Fprintf(tw, "Home:\tdata group %d\n", d.Home)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(opts.stdout)
	tw = newTable(opts.stdout)
	fmt.Fprintln(tw, "MEMBER\tTOPICS\tPARTITIONS\tLAST SEEN\tSESSION\tRESET\tPROTOCOL\tCLIENT\tHOST")
	for _, m := range d.Members {
		var parts []string
		for _, p := range m.Partitions {
			parts = append(parts, fmt.Sprintf("%s:%d", p.Topic, p.Partition))
		}
		// A Kafka member's session and heartbeats are its coordinator's,
		// not replicated: they are not shown.
		lastSeen, session := formatTime(m.LastSeen), fmt.Sprint(m.SessionTimeout)
		if m.Protocol == "kafka" {
			lastSeen, session = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, dash(strings.Join(m.Topics, ",")), dash(strings.Join(parts, ",")),
			lastSeen, session, dash(m.ResetPolicy), dash(m.Protocol), dash(m.ClientID), dash(m.ClientHost))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(opts.stdout)
	tw = newTable(opts.stdout)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG START\tEND OFFSET\tLAG\tLAG TIME\tOWNER\tSKIPPED")
	for _, p := range d.Partitions {
		owner := p.Owner
		if p.PendingOwner != "" {
			owner += " -> " + p.PendingOwner
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%d\n", p.Topic, p.Partition, offsetOrDash(p.Committed), p.LogStart, p.End, p.LagRecords, p.Lag.Round(time.Millisecond), dash(owner), p.Skipped)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func offsetOrDash(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}
