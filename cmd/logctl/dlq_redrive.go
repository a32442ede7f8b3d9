package main

import (
	"context"
	"fmt"
	"io"
	"slices"
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
		detach      bool
		maxRedrives int
		noProgress  bool
		target      string
		fromOffset  int64
		toOffset    int64
		records     []string
	)
	cmd := &cobra.Command{
		Use:   "redrive TOPIC GROUP",
		Short: "Start a server-side job that moves selected dead letters back to their origin topic at a bounded rate, and follow it",
		Long: `Redrive starts a redrive job on the cluster's leader. The job produces each
selected dead letter back to its origin topic and partition (or to --target,
routed by key), with its key, value and original headers, a logd-redrive-count
header (one more than before) and a fresh delivery count (it is a new record).
A record redriven --max-redrives times already is refused (a loop guard).

The job runs on the server: it goes on if logctl stops (Ctrl-C or --detach),
and after a leader change the next leader resumes it from its last committed
batch; each record carries an idempotency key derived from its dead letter,
so none is written twice. It stops at the dead-letter topic's end offsets as
they were when it started. Follow, list and stop jobs with
"dlq redrive status|list|stop".`,
		Example: `  logctl dlq redrive orders workers --reason max_deliveries --dry-run
  logctl dlq redrive orders workers --since 2h --rate 100/s
  logctl dlq redrive orders workers --rate 10/s --detach
  logctl dlq redrive orders workers --record 0/17 --record 2/4`,
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
			if fromOffset < 0 || toOffset < 0 || toOffset != 0 && toOffset <= fromOffset {
				return usagef("--from-offset %d, --to-offset %d: want 0 <= from < to (to 0: no bound)", fromOffset, toOffset)
			}
			refs, err := parseDeadLetterRefs(records)
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
			if dryRun {
				return redriveDryRun(cmd.Context(), c, opts.stdout, output, dlq, f, maxRedrives, fromOffset, toOffset, refs)
			}
			job, err := c.StartRedrive(cmd.Context(), client.RedriveOptions{DeadLetterTopic: dlq, Target: target, Filter: f,
				FromOffset: fromOffset, ToOffset: toOffset, Rate: perSec, MaxRedrives: maxRedrives, Records: refs})
			if err != nil {
				return err
			}
			if detach {
				if output != outputText {
					return writeData(opts.stdout, output, job)
				}
				fmt.Fprintf(opts.stdout, "redrive %s started on %s: %s to scan (follow: logctl dlq redrive status %s)\n", job.ID, dlq, count(job.Total, "record"), job.ID)
				return nil
			}
			job, err = followRedrive(cmd.Context(), c, opts.stderr, job, !noProgress)
			if err != nil {
				return fmt.Errorf("%w (the job goes on on the server: logctl dlq redrive status %s)", err, job.ID)
			}
			return printRedriveResult(opts.stdout, output, job)
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVar(&rate, "rate", "50/s", `records per second ("50/s", "50", "3000/m", "0" for unbounded)`)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be redriven; start nothing")
	cmd.Flags().BoolVar(&detach, "detach", false, "start the job and return at once")
	cmd.Flags().IntVar(&maxRedrives, "max-redrives", client.DefaultMaxRedrives, "refuse records already redriven this many times")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress on stderr")
	cmd.Flags().StringVar(&target, "target", "", "produce every record to this topic (routed by key) instead of its origin")
	cmd.Flags().Int64Var(&fromOffset, "from-offset", 0, "only dead letters at or after this offset (in every partition)")
	cmd.Flags().Int64Var(&toOffset, "to-offset", 0, "only dead letters before this offset (in every partition; 0: no bound)")
	cmd.Flags().StringSliceVar(&records, "record", nil, "only these dead letters, as PARTITION/OFFSET (repeat or comma-separate; the filters still apply; needs feature level 9)")
	addOutputFlag(cmd, &output)
	cmd.AddCommand(newDLQRedriveStatusCmd(opts), newDLQRedriveListCmd(opts), newDLQRedriveStopCmd(opts))
	return cmd
}

// redriveDryRun lists what a job with these filters would do, from the
// dead letters the node selects for them (client.ListDeadLetters); it
// writes nothing.
func redriveDryRun(ctx context.Context, c *client.Client, w io.Writer, output, dlq string, f client.DeadLetterFilter, maxRedrives int, from, to int64, refs []client.DeadLetterRef) error {
	if maxRedrives <= 0 {
		maxRedrives = client.DefaultMaxRedrives
	}
	type row struct {
		client.DeadLetter
		Outcome string `json:"outcome"`
	}
	var rows []row
	var refused int
	err := c.ListDeadLetters(ctx, dlq, f, func(d client.DeadLetter) error {
		if d.Offset < from || to > 0 && d.Offset >= to {
			return nil
		}
		if len(refs) > 0 && !slices.Contains(refs, client.DeadLetterRef{Partition: d.Partition, Offset: d.Offset}) {
			return nil
		}
		outcome := "dry-run"
		if d.Redrives >= maxRedrives {
			outcome = "refused"
			refused++
		}
		rows = append(rows, row{d, outcome})
		return nil
	})
	if err != nil {
		return err
	}
	if output != outputText {
		return writeData(w, output, map[string]any{"records": rows, "dry_run": true})
	}
	if len(rows) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "DLQ OFFSET\tOUTCOME\tREASON\tORIGIN\tKEY\tREDRIVES")
		for _, r := range rows {
			fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s/%d@%d\t%s\t%d\n", r.Partition, r.Offset, r.Outcome, r.Reason, r.OriginTopic, r.OriginPartition, r.OriginOffset,
				keyText(r.Key), r.Redrives)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "dry run: %d selected, %d would be redriven, %d refused by the loop guard\n", len(rows), len(rows)-refused, refused)
	return nil
}

// followRedrive polls a job until it ends, with a progress report on w
// (a bar on a terminal, plain lines elsewhere) unless disabled.
func followRedrive(ctx context.Context, c *client.Client, w io.Writer, job client.RedriveJob, enabled bool) (client.RedriveJob, error) {
	bar := newProgress(w, enabled, job.Total, "records")
	bar.Start()
	var seen client.RedriveProgress
	j, err := c.WaitRedrive(ctx, job.ID, 0, func(j client.RedriveJob) {
		p := j.Progress
		bar.Add(p.Scanned-seen.Scanned, p.Redriven-seen.Redriven, p.Bytes-seen.Bytes)
		seen = p
	})
	bar.Stop()
	if err != nil {
		return job, err
	}
	return j, nil
}

// printRedriveResult says how a job ended; a failed job is an error.
func printRedriveResult(w io.Writer, output string, j client.RedriveJob) error {
	if output != outputText {
		if err := writeData(w, output, j); err != nil {
			return err
		}
	} else {
		p := j.Progress
		fmt.Fprintf(w, "%d selected, %d redriven, %d already redriven by an earlier run, %d refused by the loop guard (job %s %s, position: group %s)\n",
			p.Scanned-p.Skipped, p.Redriven, p.Duplicates, p.Refused, j.ID, j.State, j.PositionGroup)
	}
	if j.State == client.RedriveFailed {
		return fmt.Errorf("redrive %s failed: %s", j.ID, j.Error)
	}
	return nil
}

func newDLQRedriveStatusCmd(opts *globalOpts) *cobra.Command {
	var (
		output string
		follow bool
	)
	cmd := &cobra.Command{
		Use:     "status ID",
		Short:   "Show a redrive job's state and progress",
		Example: "  logctl dlq redrive status rd42\n  logctl dlq redrive status rd42 --follow",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			j, err := c.DescribeRedrive(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if follow && !j.Ended() {
				if j, err = followRedrive(cmd.Context(), c, opts.stderr, j, true); err != nil {
					return err
				}
			}
			if output != outputText {
				return writeData(opts.stdout, output, j)
			}
			return printRedriveJobs(opts.stdout, []client.RedriveJob{j})
		},
	}
	cmd.Flags().BoolVar(&follow, "follow", false, "follow the job until it ends")
	addOutputFlag(cmd, &output)
	return cmd
}

func newDLQRedriveListCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list [DEAD-LETTER-TOPIC]",
		Short:   "List redrive jobs (running ones and the latest ended)",
		Example: "  logctl dlq redrive list\n  logctl dlq redrive list orders.workers.dlq -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			var topic string
			if len(args) == 1 {
				topic = args[0]
			}
			jobs, err := c.ListRedrives(cmd.Context(), topic)
			if err != nil {
				return err
			}
			if output != outputText {
				return writeData(opts.stdout, output, jobs)
			}
			return printRedriveJobs(opts.stdout, jobs)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newDLQRedriveStopCmd(opts *globalOpts) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "stop ID",
		Short:   "Stop a running redrive job after the batch in hand",
		Example: "  logctl dlq redrive stop rd42",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			j, err := c.StopRedrive(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if output != outputText {
				return writeData(opts.stdout, output, j)
			}
			return printRedriveJobs(opts.stdout, []client.RedriveJob{j})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printRedriveJobs prints jobs as a table.
func printRedriveJobs(w io.Writer, jobs []client.RedriveJob) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tSTATE\tDEAD LETTERS\tTARGET\tSCANNED\tREDRIVEN\tDUPLICATES\tREFUSED\tSKIPPED\tBYTES\tPOSITION\tERROR")
	for _, j := range jobs {
		target := j.Options.Target
		if target == "" {
			target = "(origin)"
		}
		pos := make([]string, len(j.Position))
		for i, p := range j.Position {
			pos[i] = fmt.Sprintf("%d/%d", p, j.EndOffsets[min(i, len(j.EndOffsets)-1)])
		}
		errText := j.Error
		if errText == "" {
			errText = "-"
		}
		p := j.Progress
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", j.ID, j.State, j.Options.DeadLetterTopic, target,
			p.Scanned, j.Total, p.Redriven, p.Duplicates, p.Refused, p.Skipped, formatBytes(p.Bytes), strings.Join(pos, ","), errText)
	}
	return tw.Flush()
}

// parseDeadLetterRefs reads --record values, PARTITION/OFFSET each.
func parseDeadLetterRefs(vals []string) ([]client.DeadLetterRef, error) {
	var out []client.DeadLetterRef
	for _, v := range vals {
		ps, os, ok := strings.Cut(strings.TrimSpace(v), "/")
		p, perr := strconv.ParseInt(ps, 10, 32)
		o, oerr := strconv.ParseInt(os, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
			return nil, usagef("--record %q: want PARTITION/OFFSET, as dlq list prints them (e.g. 0/17)", v)
		}
		out = append(out, client.DeadLetterRef{Partition: int32(p), Offset: o})
	}
	return out, nil
}

// parseRate reads "50/s", "50" or "3000/m".
func parseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(s, "/")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, usagef("--rate %q: want N/s", s)
	}
	switch unit {
	case "", "s":
		return v, nil
	case "m":
		return v / 60, nil
	}
	return 0, usagef("--rate %q: unit must be /s or /m", s)
}
