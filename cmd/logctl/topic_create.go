package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newTopicCreateCmd(opts *globalOpts) *cobra.Command {
	var (
		partitions int32
		configs    []string
		output     string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Example: `  logctl topic create orders --partitions 6
  logctl topic create audit --partitions 1 --config retention.ms=86400000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			config, err := parsePairs("--config", configs)
			if err != nil {
				return err
			}
			cfg := make(map[string]string, len(config))
			for _, kv := range config {
				cfg[kv[0]] = kv[1]
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			t, err := c.CreateTopic(cmd.Context(), args[0], partitions, cfg)
			if err != nil {
				return err
			}
			if output != outputText {
				return writeData(opts.stdout, output, t)
			}
			_, err = fmt.Fprintf(opts.stdout, "created topic %s with %s\n", t.Name, count(t.Partitions, "partition"))
			return err
		},
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 1, "number of partitions")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic setting key=value (repeatable), e.g. retention.ms=86400000")
	addOutputFlag(cmd, &output)
	return cmd
}

// parsePairs splits "k=v" flag values; the value may be empty or contain
// '='.
func parsePairs(flag string, in []string) ([][2]string, error) {
	out := make([][2]string, 0, len(in))
	for _, s := range in {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want key=value", flag, s)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}
