package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newDLQListCmd(opts *globalOpts) *cobra.Command {
	var (
		output      string
		flags       dlqFlags
		limit       int
		history     bool
		notRedriven bool
	)
	cmd := &cobra.Command{
		Use:   "list TOPIC GROUP",
		Short: "List a queue group's dead letters: reason, origin, attempts, last error, age",
		Long: `List a queue group's dead letters: where each is in the dead-letter topic,
why it was dead-lettered, where it came from, its deliveries and redrives.
The node selects them as a redrive with the same filters would (dead-lettering
times to the millisecond); a node too old for that is read and filtered here.
--output json and yaml print the record's key, value and headers as
consume does: a UTF-8 string, or base64 flagged by key_encoding /
value_encoding "base64", and null for a null key or value.
STATE says which redrive job moved a dead letter ("redriven by job rd3
at T": the job's last update, at or after the move) or will ("pending in
job rd3"), as the node derives it from the redrive jobs it keeps;
--not-redriven leaves those out.`,
		Example: `  logctl dlq list orders workers
  logctl dlq list orders workers --reason max_deliveries --since 1h -o json
  logctl dlq list orders workers --key order-7 --limit 10
  logctl dlq list orders workers --history
  logctl dlq list orders workers --not-redriven`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			now := time.Now()
			f, err := flags.filter(now)
			if err != nil {
				return err
			}
			f.NotRedriven = notRedriven
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			dlq, err := flags.deadLetterTopic(cmd, c, args[0], args[1])
			if err != nil {
				return err
			}
			var out []client.DeadLetter
			errLimit := fmt.Errorf("limit reached")
			err = c.ListDeadLetters(cmd.Context(), dlq, f, func(d client.DeadLetter) error {
				if d.Group != args[1] && flags.topic == "" {
					return nil // another group sharing the topic
				}
				if !history {
					d.History = nil
				}
				out = append(out, d)
				if limit > 0 && len(out) >= limit {
					return errLimit
				}
				return nil
			})
			if err != nil && err != errLimit {
				return err
			}
			if output != outputText {
				rows := make([]deadLetterOut, 0, len(out))
				for _, d := range out {
					rows = append(rows, newDeadLetterOut(d))
				}
				return writeData(opts.stdout, output, rows)
			}
			if err := printDeadLetters(opts.stdout, out, now, history); err != nil {
				return err
			}
			fmt.Fprintf(opts.stderr, "%s in %s\n", count(len(out), "dead letter"), dlq)
			return nil
		},
	}
	flags.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	cmd.Flags().BoolVar(&notRedriven, "not-redriven", false, "leave out the dead letters a redrive job moved or will")
	cmd.Flags().BoolVar(&history, "history", false, "show each attempt under its dead letter: claim time, worker, lease, outcome, error")
	addOutputFlag(cmd, &output)
	return cmd
}

// deadLetterOut is the --output json and yaml form of a dead letter: the
// client's fields, with key, value and headers in consume's form.
type deadLetterOut struct {
	Topic           string    `json:"topic"`
	Partition       int32     `json:"partition"`
	Offset          int64     `json:"offset"`
	Reason          string    `json:"reason"`
	LastError       string    `json:"last_error,omitempty"`
	OriginTopic     string    `json:"origin_topic"`
	OriginPartition int32     `json:"origin_partition"`
	OriginOffset    int64     `json:"origin_offset"`
	Group           string    `json:"group"`
	Deliveries      int       `json:"deliveries"`
	FirstDelivery   time.Time `json:"first_delivery,omitzero"`
	LastDelivery    time.Time `json:"last_delivery,omitzero"`
	DeadLettered    time.Time `json:"dead_lettered"`
	IdempotencyKey  string    `json:"idempotency_key,omitempty"`
	Redrives        int       `json:"redrives"`
	// History is each attempt (with --history; docs/guide.md, "Work queues").
	History *client.DeadLetterHistory `json:"history,omitempty"`
	// Redrive is the job that moved the dead letter or will (docs/guide.md,
	// "Redriven dead letters").
	Redrive *client.DeadLetterRedrive `json:"redrive,omitempty"`
	recordBytes
}

// redriveState is a dead letter's STATE column.
func redriveState(r *client.DeadLetterRedrive) string {
	switch {
	case r == nil:
		return "-"
	case r.Pending:
		return "pending in job " + r.Job
	}
	return fmt.Sprintf("redriven by job %s at %s", r.Job, r.At.UTC().Format(timeMillis))
}

func newDeadLetterOut(d client.DeadLetter) deadLetterOut {
	return deadLetterOut{Topic: d.Topic, Partition: d.Partition, Offset: d.Offset, Reason: d.Reason, LastError: d.LastError,
		OriginTopic: d.OriginTopic, OriginPartition: d.OriginPartition, OriginOffset: d.OriginOffset, Group: d.Group,
		Deliveries: d.Deliveries, FirstDelivery: d.FirstDelivery.UTC(), LastDelivery: d.LastDelivery.UTC(), DeadLettered: d.DeadLettered.UTC(),
		IdempotencyKey: d.IdempotencyKey, Redrives: d.Redrives, History: d.History, Redrive: d.Redrive, recordBytes: newRecordBytes(d.Key, d.Value, d.Headers)}
}

// printDeadLetters writes the dead letters as a table and, with history,
// each one's attempts in an indented block of their own under its row. The
// table is aligned over all its rows first: the attempts have other
// columns, and a line of them inside the table would widen its columns
// and cut them in two (tabwriter aligns only consecutive lines).
func printDeadLetters(w io.Writer, out []client.DeadLetter, now time.Time, history bool) error {
	var table bytes.Buffer
	tw := newTable(&table)
	fmt.Fprintln(tw, "DLQ OFFSET\tREASON\tORIGIN\tKEY\tATTEMPTS\tREDRIVES\tAGE\tSTATE\tLAST ERROR")
	for _, d := range out {
		fmt.Fprintf(tw, "%d/%d\t%s\t%s/%d@%d\t%s\t%d\t%d\t%s\t%s\t%s\n", d.Partition, d.Offset, d.Reason, d.OriginTopic, d.OriginPartition, d.OriginOffset,
			keyText(d.Key), d.Deliveries, d.Redrives, age(now.Sub(d.DeadLettered)), redriveState(d.Redrive), cellText(d.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// One line per row: cellText leaves no line break in a cell.
	rows := strings.SplitAfter(table.String(), "\n")
	if _, err := io.WriteString(w, rows[0]); err != nil {
		return err
	}
	for i, d := range out {
		if _, err := io.WriteString(w, rows[i+1]); err != nil {
			return err
		}
		if history {
			if err := printHistory(w, d.History); err != nil {
				return err
			}
		}
	}
	return nil
}

// cellText is s for a table cell: a tab, line break or carriage return in
// it, which would move the columns or end the row, is written escaped.
func cellText(s string) string {
	return cellEscaper.Replace(s)
}

var cellEscaper = strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`)

// printHistory lists a dead letter's attempts, indented under its row, in
// columns of their own.
func printHistory(w io.Writer, h *client.DeadLetterHistory) error {
	if h == nil {
		_, err := fmt.Fprintln(w, "  (no attempt history: dead-lettered before feature level 6)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if h.PreviousUnreadable {
		fmt.Fprintln(tw, "  (the history before its last redrive was unreadable)")
	}
	if h.DroppedAttempts > 0 {
		fmt.Fprintf(tw, "  (%d older attempts not kept)\n", h.DroppedAttempts)
	}
	for _, a := range h.Attempts {
		worker := a.Worker
		if worker == "" {
			worker = "-"
		}
		held := "-"
		if !a.Ended.IsZero() && !a.Claimed.IsZero() && a.LeaseUntil.After(a.Claimed) {
			held = a.Ended.Sub(a.Claimed).Round(time.Millisecond).String()
		}
		text := cellText(a.Error)
		switch {
		case a.ErrorDropped:
			text = "(error text dropped: the group's history budget)"
		case a.ErrorTruncated:
			text += " (cut at 1 KiB)"
		}
		redrive := ""
		if a.Redrive > 0 {
			redrive = fmt.Sprintf(" redrive %d", a.Redrive)
		}
		fmt.Fprintf(tw, "  #%d%s\t%s\t%s\tworker %s\theld %s\textended %d\t%s\n", a.Delivery, redrive, a.Outcome,
			a.Claimed.UTC().Format(timeMillis), cellText(worker), held, a.Extensions, text)
	}
	return tw.Flush()
}

// timeMillis is how dlq list prints times: UTC to the millisecond.
const timeMillis = "2006-01-02T15:04:05.000Z"
