package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"
)

func newTopicAlterCmd(opts *globalOpts) *cobra.Command {
	var (
		configs []string
		deletes []string
		output  string
	)
	cmd := &cobra.Command{
		Use:   "alter NAME",
		Short: "Change a topic's settings at runtime",
		Long: `Change a topic's settings. Settings not named keep their value;
--delete-config returns a setting to its default. Prints the effective
settings afterwards. A bad key or value changes nothing.`,
		Example: `  logctl topic alter orders --config retention.ms=86400000 --config retention.bytes=1073741824
  logctl topic alter users --config cleanup.policy=compact --config min.compaction.lag.ms=60000
  logctl topic alter orders --delete-config retention.bytes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			pairs, err := parsePairs("--config", configs)
			if err != nil {
				return err
			}
			if len(pairs) == 0 && len(deletes) == 0 {
				return fmt.Errorf("nothing to change: give --config key=value or --delete-config key")
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
				fmt.Fprintf(tw, "%s\t%s\n", k, t.Config[k])
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "setting key=value (repeatable), e.g. retention.ms=86400000")
	cmd.Flags().StringArrayVar(&deletes, "delete-config", nil, "setting to return to its default (repeatable)")
	addOutputFlag(cmd, &output)
	return cmd
}
