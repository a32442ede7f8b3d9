package main

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newTopicDescribeCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's settings and the state of each partition",
		Long: `Show a topic's settings and, per partition, the log start and end offsets,
OFFSETS (end minus start: the records written there and not yet removed by
retention; compaction removes records inside that range, so fewer may be
left, and COMPACTED and LAST CLEANER RUN say whether it has run), the bytes
and segments on the answering node.`,
		Example: `  logctl topic describe orders
  logctl topic describe orders -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				d, err := c.DescribeTopic(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if output != outputText {
					return writeData(opts.stdout, output, d)
				}
				tw := newTable(opts.stdout)
				fmt.Fprintf(tw, "Topic:\t%s\n", d.Topic.Name)
				fmt.Fprintf(tw, "Partitions:\t%d\n", d.Topic.Partitions)
				fmt.Fprintf(tw, "Created:\t%s\n", formatTime(d.Topic.Created))
				for i, k := range slices.Sorted(maps.Keys(d.Topic.Config)) {
					label := ""
					if i == 0 {
						label = "Config:"
					}
					fmt.Fprintf(tw, "%s\t%s=%s\n", label, k, configValueText(k, d.Topic.Config[k]))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(opts.stdout)
				tw = newTable(opts.stdout)
				// A topic placed over data groups shows each partition's
				// group and leader.
				placed := slices.ContainsFunc(d.Partitions, func(p client.PartitionInfo) bool { return p.DataGroup != 0 })
				head := "PARTITION\tLOG START\tEND OFFSET\tOFFSETS\tBYTES\tSEGMENTS\tCOMPACTED\tLAST CLEANER RUN"
				if placed {
					head = "PARTITION\tGROUP\tLEADER\tLOG START\tEND OFFSET\tOFFSETS\tBYTES\tSEGMENTS\tCOMPACTED\tLAST CLEANER RUN"
				}
				fmt.Fprintln(tw, head)
				for _, p := range d.Partitions {
					fmt.Fprintf(tw, "%d\t", p.Partition)
					if placed {
						fmt.Fprintf(tw, "%d\t%s\t", p.DataGroup, dash(p.Leader))
					}
					fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%d\t%s\n", p.LogStart, p.End, p.End-p.LogStart, formatBytes(p.Bytes), p.Segments,
						p.CompactedSegments, formatCleanerRun(p.LastCleanerRun))
				}
				return tw.Flush()
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// formatCleanerRun prints a cleaner run for tables, "-" when none is known:
// "compact 2026-01-02T03:04:05Z -1.0 MiB -2000 records".
func formatCleanerRun(r *client.CleanerRun) string {
	if r == nil {
		return "-"
	}
	s := fmt.Sprintf("%s %s -%s", r.Action, formatTime(r.Time), formatBytes(r.BytesDeleted))
	if r.Action == "compact" {
		s += " -" + count(r.RecordsRemoved, "record")
	}
	return s
}

// formatTime prints a time for tables: RFC 3339 in UTC, "-" when unknown.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
