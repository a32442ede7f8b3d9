package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

type resetFlags struct {
	topics     []string
	allTopics  bool
	toEarliest bool
	toLatest   bool
	toOffset   int64
	toDatetime string
	shiftBy    int64
	byDuration time.Duration
	fromFile   string
	execute    bool
	output     string
}

func newGroupResetOffsetsCmd(opts *globalOpts) *cobra.Command {
	var f resetFlags
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP",
		Short: "Plan, and with --execute apply, a reset of a group's committed offsets",
		Long: `Move a consumer group's committed offsets (the next offset to read), back
to replay or forward to skip. Select partitions with --topic T (all of its
partitions) or --topic T:0,1, repeatable, or --all-topics; choose exactly one
of --to-earliest, --to-latest, --to-offset N, --to-datetime T (RFC 3339),
--shift-by ±N, --by-duration D (now minus D), or --from-file F (a plan saved
with --output json, whose new_offset values are applied).

Without --execute the plan is printed (partition, current, new, lag before
and after) and nothing changes. New offsets are clamped to the log's bounds,
and the plan says so. With --execute the reset is applied atomically even
while members are consuming: the group's generation is bumped, so members
are fenced, re-join and continue at the new offsets, and no commit from
before the reset can undo it.`,
		Example: `  logctl group reset-offsets billing --topic orders --to-earliest
  logctl group reset-offsets billing --topic orders:0,1 --shift-by -100 --execute
  logctl group reset-offsets billing --all-topics --by-duration 1h -o json > plan.json
  logctl group reset-offsets billing --from-file plan.json --execute`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			req, err := f.request(cmd, args[0])
			if err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			plan, err := c.ResetGroupOffsets(cmd.Context(), req)
			if err != nil {
				return err
			}
			if f.output != outputText {
				if plan.Partitions == nil {
					plan.Partitions = []client.PlannedReset{}
				}
				if err := writeData(opts.stdout, f.output, plan); err != nil {
					return err
				}
			} else if err := printResetPlan(opts, plan); err != nil {
				return err
			}
			for _, p := range plan.Partitions {
				if p.Clamped {
					// Clamped to the log's end above it, to its start below it.
					edge := "end"
					if p.Requested < p.New {
						edge = "start"
					}
					opts.logf("%s:%d: offset %d is outside the log; clamped to its %s, %d", p.Topic, p.Partition, p.Requested, edge, p.New)
				}
			}
			if plan.Executed {
				opts.logf("reset applied to %s; group %s is at generation %d", count(len(plan.Partitions), "partition"), plan.Group, plan.Generation)
			} else {
				opts.logf("dry run: nothing changed; add --execute to apply")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.topics, "topic", nil, "topic to reset, optionally with partitions: T or T:0,1 (repeatable)")
	fl.BoolVar(&f.allTopics, "all-topics", false, "reset every topic of the group")
	fl.BoolVar(&f.toEarliest, "to-earliest", false, "to the log start")
	fl.BoolVar(&f.toLatest, "to-latest", false, "to the end (skip everything)")
	fl.Int64Var(&f.toOffset, "to-offset", 0, "to this offset")
	fl.StringVar(&f.toDatetime, "to-datetime", "", "to the first record at or after this RFC 3339 time")
	fl.Int64Var(&f.shiftBy, "shift-by", 0, "move by this many records (negative: back)")
	fl.DurationVar(&f.byDuration, "by-duration", 0, "to the first record at or after now minus this duration")
	fl.StringVar(&f.fromFile, "from-file", "", "apply a plan saved with --output json")
	fl.BoolVar(&f.execute, "execute", false, "apply the plan (default: print it only)")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// request builds the reset request from the flags, checking that exactly
// one strategy and one selection are given.
func (f *resetFlags) request(cmd *cobra.Command, group string) (client.ResetOffsetsRequest, error) {
	req := client.ResetOffsetsRequest{Group: group, AllTopics: f.allTopics, Execute: f.execute}
	changed := cmd.Flags().Changed
	var strategies []string
	for _, s := range []string{"to-earliest", "to-latest", "to-offset", "to-datetime", "shift-by", "by-duration", "from-file"} {
		if changed(s) {
			strategies = append(strategies, "--"+s)
		}
	}
	if len(strategies) != 1 {
		return req, usagef("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by, --by-duration, --from-file (got %d)", len(strategies))
	}
	switch {
	case f.toEarliest:
		req.Strategy = client.ResetToEarliest
	case f.toLatest:
		req.Strategy = client.ResetToLatest
	case changed("to-offset"):
		if f.toOffset < 0 {
			return req, usagef("--to-offset %d: offsets are not negative", f.toOffset)
		}
		req.Strategy, req.Offset = client.ResetToOffset, f.toOffset
	case changed("to-datetime"):
		t, err := time.Parse(time.RFC3339Nano, f.toDatetime)
		if err != nil {
			return req, usagef("--to-datetime %q: want an RFC 3339 time", f.toDatetime)
		}
		req.Strategy, req.Time = client.ResetToDatetime, t
	case changed("shift-by"):
		req.Strategy, req.Shift = client.ResetShiftBy, f.shiftBy
	case changed("by-duration"):
		if f.byDuration < 0 {
			return req, usagef("--by-duration %v: must not be negative", f.byDuration)
		}
		req.Strategy, req.Duration = client.ResetByDuration, f.byDuration
	case changed("from-file"):
		plan, err := readPlanFile(f.fromFile)
		if err != nil {
			return req, err
		}
		if plan.Group != "" && plan.Group != group {
			return req, usagef("--from-file %s is a plan for group %q, not %q", f.fromFile, plan.Group, group)
		}
		req.Strategy, req.Offsets = client.ResetExplicit, plan.Partitions
		if len(f.topics) > 0 || f.allTopics {
			return req, usagef("--from-file names its partitions; do not add --topic or --all-topics")
		}
		return req, nil
	}
	if len(f.topics) > 0 == f.allTopics {
		return req, usagef("give --topic (repeatable) or --all-topics")
	}
	req.Topics = map[string][]int32{}
	for _, s := range f.topics {
		name, parts, err := parseTopicPartitions(s)
		if err != nil {
			return req, err
		}
		req.Topics[name] = append(req.Topics[name], parts...)
	}
	return req, nil
}

// parseTopicPartitions parses "T" or "T:0,1".
func parseTopicPartitions(s string) (string, []int32, error) {
	name, list, ok := strings.Cut(s, ":")
	if name == "" {
		return "", nil, usagef("--topic %q: empty topic", s)
	}
	if !ok {
		return name, nil, nil
	}
	var parts []int32
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			return "", nil, usagef("--topic %q: partition %q is not a number", s, p)
		}
		parts = append(parts, int32(n))
	}
	return name, parts, nil
}

func readPlanFile(path string) (client.ResetPlan, error) {
	var plan client.ResetPlan
	b, err := os.ReadFile(path)
	if err != nil {
		return plan, fmt.Errorf("--from-file: %w", err)
	}
	if err := json.Unmarshal(b, &plan); err != nil {
		return plan, usagef("--from-file %s: not a plan saved with --output json: %w", path, err)
	}
	if len(plan.Partitions) == 0 {
		return plan, usagef("--from-file %s: the plan has no partitions", path)
	}
	return plan, nil
}

func printResetPlan(opts *globalOpts, plan client.ResetPlan) error {
	tw := newTable(opts.stdout)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tNEW\tLAG BEFORE\tLAG AFTER\tNOTE")
	for _, p := range plan.Partitions {
		note := ""
		if p.Clamped {
			note = fmt.Sprintf("clamped (asked %d)", p.Requested)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\n", p.Topic, p.Partition, offsetOrDash(p.Current), p.New, p.LagBefore, p.LagAfter, note)
	}
	return tw.Flush()
}
