package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newDLQRedriveCmd(opts *globalOpts) *cobra.Command {
	var (
		output      string
		flags       dlqFlags
		rate        string
		dryRun      bool
		maxRedrives int
		noProgress  bool
	)
	cmd := &cobra.Command{
		Use:   "redrive TOPIC GROUP",
		Short: "Move selected dead letters back to their origin topic at a bounded rate; resumable",
		Long: `Redrive produces each selected dead letter back to its origin topic and
partition, with its key, value and original headers, a logd-redrive-count
header (one more than before) and a fresh delivery count (it is a new record).
A record redriven --max-redrives times already is refused (a loop guard).

The position is saved after each record as the committed offset of the
consumer group logd-redrive.<dead-letter topic>.<filter hash>, and each record
is produced with an idempotency key derived from its original key (or origin)
and redrive count: a redrive interrupted at any point and run again with the
same filters continues where it stopped, without duplicates.`,
		Example: `  logctl dlq redrive orders workers --reason max_deliveries --dry-run
  logctl dlq redrive orders workers --since 2h --rate 100/s`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			perSec, err := parseRate(rate)
			if err != nil {
				return err
			}
			f, err := flags.filter(time.Now())
			if err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			dlq, err := flags.deadLetterTopic(cmd, c, args[0], args[1])
			if err != nil {
				return err
			}
			type row struct {
				client.DeadLetter
				Outcome string `json:"outcome"`
			}
			var rows []row
			var bar *progress
			ro := client.RedriveOptions{DeadLetterTopic: dlq, Filter: f, Rate: perSec, DryRun: dryRun, MaxRedrives: maxRedrives,
				Each: func(d client.DeadLetter, outcome string) {
					if dryRun || outcome == "refused" {
						rows = append(rows, row{d, outcome})
					}
				},
				Progress: func(done, total int64) {
					if bar == nil {
						bar = newProgress(opts.stderr, !noProgress && !dryRun, total, "records")
						bar.Start()
					}
					bar.Add(1, 1, 0)
				},
			}
			res, err := c.Redrive(cmd.Context(), ro)
			bar.Stop()
			if err != nil {
				return fmt.Errorf("%w (position kept in group %s; run again to continue)", err, res.Position)
			}
			if output != outputText {
				return writeData(opts.stdout, output, map[string]any{"result": res, "records": rows, "dry_run": dryRun})
			}
			if len(rows) > 0 {
				tw := newTable(opts.stdout)
				fmt.Fprintln(tw, "DLQ OFFSET\tOUTCOME\tREASON\tORIGIN\tKEY\tREDRIVES")
				for _, r := range rows {
					fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s/%d@%d\t%s\t%d\n", r.Partition, r.Offset, r.Outcome, r.Reason, r.OriginTopic, r.OriginPartition, r.OriginOffset,
						strconv.Quote(string(r.Key)), r.Redrives)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if dryRun {
				fmt.Fprintf(opts.stdout, "dry run: %d selected, %d would be redriven, %d refused by the loop guard\n", res.Selected, res.Selected-res.Refused, res.Refused)
				return nil
			}
			fmt.Fprintf(opts.stdout, "%d selected, %d redriven, %d already redriven by an earlier run, %d refused by the loop guard (position: group %s)\n",
				res.Selected, res.Redriven, res.Duplicates, res.Refused, res.Position)
			return nil
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVar(&rate, "rate", "50/s", `records per second ("50/s", "50", "0" for unbounded)`)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be redriven; change nothing")
	cmd.Flags().IntVar(&maxRedrives, "max-redrives", client.DefaultMaxRedrives, "refuse records already redriven this many times")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress bar on stderr")
	addOutputFlag(cmd, &output)
	return cmd
}

// parseRate reads "50/s", "50" or "3000/m".
func parseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(s, "/")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("--rate %q: want N/s", s)
	}
	switch unit {
	case "", "s":
		return v, nil
	case "m":
		return v / 60, nil
	}
	return 0, fmt.Errorf("--rate %q: unit must be /s or /m", s)
}
