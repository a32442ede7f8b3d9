package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// keyedOrderCaveat is what a growth of a topic's partitions means for
// keyed records; topic alter --partitions prints it to stderr and puts it
// in its JSON.
const keyedOrderCaveat = "keyed records produced from now on are spread over %d partitions instead of %d: " +
	"a key may go to another partition than its earlier records, so its records stay in order within each " +
	"partition but not across the growth (consumers of keyed order may want to drain the topic first)"

// growResult is what topic alter --partitions prints with --output json.
type growResult struct {
	Topic      string `json:"topic"`
	Previous   int32  `json:"previous_partitions"`
	Partitions int32  `json:"partitions"`
	// Added is the partitions added, or that would be (--dry-run).
	Added  int32 `json:"added"`
	DryRun bool  `json:"dry_run"`
	// Caveat is the keyed-order warning; empty when nothing is added.
	Caveat string `json:"caveat,omitempty"`
}

func newTopicAlterCmd(opts *globalOpts) *cobra.Command {
	var (
		configs    []string
		deletes    []string
		partitions int32
		dryRun     bool
		output     string
	)
	cmd := &cobra.Command{
		Use:   "alter NAME",
		Short: "Change a topic's settings, or add partitions, at runtime",
		Long: `Change a topic's settings. Settings not named keep their value;
--delete-config returns a setting to its default. Prints the effective
settings afterwards. A bad key or value changes nothing.

--partitions N grows the topic to N partitions in all (not N more), at once
on every node; the new partitions start empty at offset 0, and consumer
groups, queue groups and Kafka clients see them (a group member at its next
heartbeat, a Kafka client at its next metadata refresh). Partitions are
never removed: a smaller N is refused. Keyed records produced afterwards map
over N partitions, so a key's new records may go to another partition than
its earlier ones: logctl prints that caveat. --dry-run checks the growth
(count, quotas, permission) and prints it without making it. --partitions
is a change of its own: it does not combine with --config.`,
		Example: `  logctl topic alter orders --config retention.ms=86400000 --config retention.bytes=1073741824
  logctl topic alter users --config cleanup.policy=compact --config min.compaction.lag.ms=60000
  logctl topic alter orders --delete-config retention.bytes
  logctl topic alter orders --partitions 6 --dry-run
  logctl topic alter orders --partitions 6`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if cmd.Flags().Changed("partitions") {
				if len(configs) > 0 || len(deletes) > 0 {
					return usagef("--partitions does not combine with --config or --delete-config: run one topic alter for each")
				}
				if partitions < 1 {
					return usagef("--partitions %d: a topic has at least 1 partition", partitions)
				}
				return opts.withClient(output, func(c *client.Client) error {
					return growTopic(cmd.Context(), opts, c, args[0], partitions, dryRun, output)
				})
			}
			if dryRun {
				return usagef("--dry-run applies to --partitions only")
			}
			pairs, err := parsePairs("--config", configs)
			if err != nil {
				return err
			}
			if len(pairs) == 0 && len(deletes) == 0 {
				return fmt.Errorf("nothing to change: give --config key=value, --delete-config key or --partitions N")
			}
			set := make(map[string]string, len(pairs))
			for _, kv := range pairs {
				set[kv[0]] = kv[1]
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			t, err := c.AlterTopic(cmd.Context(), args[0], set, deletes)
			if err != nil {
				return err
			}
			if output != outputText {
				return writeData(opts.stdout, output, t)
			}
			tw := newTable(opts.stdout)
			fmt.Fprintln(tw, "KEY\tVALUE")
			for _, k := range slices.Sorted(maps.Keys(t.Config)) {
				fmt.Fprintf(tw, "%s\t%s\n", k, configValueText(k, t.Config[k]))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "setting key=value (repeatable), e.g. retention.ms=86400000")
	cmd.Flags().StringArrayVar(&deletes, "delete-config", nil, "setting to return to its default (repeatable)")
	cmd.Flags().Int32Var(&partitions, "partitions", 0, "grow the topic to this many partitions in all (never fewer)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "with --partitions: check and print the growth without making it")
	addOutputFlag(cmd, &output)
	return cmd
}

// growTopic runs topic alter --partitions: the growth (or its check),
// printed as a table or as growResult, with the keyed-order caveat on
// stderr when partitions are added.
func growTopic(ctx context.Context, opts *globalOpts, c *client.Client, name string, n int32, dryRun bool, output string) error {
	g, err := c.CreatePartitions(ctx, name, n, dryRun)
	if err != nil {
		return err
	}
	res := growResult{Topic: name, Previous: g.Previous, Partitions: g.Topic.Partitions, DryRun: dryRun}
	if dryRun {
		res.Partitions = n
	}
	res.Added = res.Partitions - res.Previous
	if res.Added > 0 {
		res.Caveat = fmt.Sprintf(keyedOrderCaveat, res.Partitions, res.Previous)
	}
	if output != outputText {
		if err := writeData(opts.stdout, output, res); err != nil {
			return err
		}
	} else {
		tw := newTable(opts.stdout)
		fmt.Fprintln(tw, "TOPIC\tPARTITIONS BEFORE\tPARTITIONS AFTER\tADDED")
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", name, res.Previous, res.Partitions, res.Added)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	switch {
	case res.Added == 0:
		opts.logf("topic %s already has %s: nothing changed", name, count(res.Previous, "partition"))
	case dryRun:
		opts.logf("warning: %s", res.Caveat)
		opts.logf("dry run: nothing changed; run without --dry-run to add %s", count(res.Added, "partition"))
	default:
		opts.logf("warning: %s", res.Caveat)
		opts.logf("added %s to topic %s", count(res.Added, "partition"), name)
	}
	return nil
}
