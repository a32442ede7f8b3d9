package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Work queues: queue groups, claims, acks, nacks and leases",
		Long: `A queue group works a topic's records one by one: claim leases records with
delivery tokens; ack finishes them; nack retries them after a backoff or
dead-letters them; extend keeps long jobs leased.`,
	}
	cmd.AddCommand(
		newQueueCreateCmd(opts),
		newQueueAlterCmd(opts),
		newQueueDescribeCmd(opts),
		newQueueClaimCmd(opts),
		newQueueAckCmd(opts),
		newQueueNackCmd(opts),
		newQueueExtendCmd(opts),
		newQueuePauseCmd(opts, true),
		newQueuePauseCmd(opts, false),
		newQueueTopCmd(opts),
	)
	return cmd
}

// maxQueueDelay is the server's bound on a queue group's durations.
const maxQueueDelay = 7 * 24 * time.Hour

// queueConfigFlags are the settings flags of queue create and alter.
type queueConfigFlags struct {
	lease, backoffBase, backoffMax, ageLimit time.Duration
	maxDeliveries, maxInFlight               int
	deadLetterTopic, deadlineHeader          string
}

func (f *queueConfigFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.DurationVar(&f.lease, "lease", 0, "default lease of a claim (server default 30s)")
	fl.IntVar(&f.maxDeliveries, "max-deliveries", 0, "deliveries before a failing record is dead-lettered (server default 5)")
	fl.DurationVar(&f.backoffBase, "backoff-base", 0, "first retry delay ceiling after a transient nack (server default 1s)")
	fl.DurationVar(&f.backoffMax, "backoff-max", 0, "cap of the retry delay (server default 5m)")
	fl.IntVar(&f.maxInFlight, "max-in-flight", 0, "per partition, records delivered and not finished (server default 1000)")
	fl.DurationVar(&f.ageLimit, "age-limit", 0, "dead-letter records older than this, up to 168h (0: none, the default; in alter, 0 removes the limit)")
	fl.StringVar(&f.deadLetterTopic, "dead-letter-topic", "", `dead-letter topic (default "<topic>.<group>.dlq")`)
	fl.StringVar(&f.deadlineHeader, "deadline-header", "", `header with a record's business deadline (default "deadline"; "-" for none)`)
}

func (f *queueConfigFlags) config() client.QueueGroupConfig {
	return client.QueueGroupConfig{
		Lease: f.lease, MaxDeliveries: f.maxDeliveries, BackoffBase: f.backoffBase, BackoffMax: f.backoffMax,
		MaxInFlight: f.maxInFlight, AgeLimit: f.ageLimit, DeadLetterTopic: f.deadLetterTopic, DeadlineHeader: f.deadlineHeader,
	}
}

// printQueueConfig writes a group's settings as aligned lines.
func printQueueConfig(w io.Writer, cfg client.QueueGroupConfig) error {
	tw := newTable(w)
	age := "none"
	if cfg.AgeLimit > 0 {
		age = humanDuration(cfg.AgeLimit)
	}
	fmt.Fprintf(tw, "Lease:\t%s\n", humanDuration(cfg.Lease))
	fmt.Fprintf(tw, "Max deliveries:\t%d\n", cfg.MaxDeliveries)
	fmt.Fprintf(tw, "Backoff:\t%s .. %s (full jitter)\n", humanDuration(cfg.BackoffBase), humanDuration(cfg.BackoffMax))
	fmt.Fprintf(tw, "Max in flight:\t%d per partition\n", cfg.MaxInFlight)
	fmt.Fprintf(tw, "Age limit:\t%s\n", age)
	fmt.Fprintf(tw, "Dead-letter topic:\t%s\n", cfg.DeadLetterTopic)
	fmt.Fprintf(tw, "Deadline header:\t%s\n", cfg.DeadlineHeader)
	return tw.Flush()
}

// printTokenResults writes one line per token of an ack, nack or extend.
func printTokenResults(w io.Writer, output string, rs []client.TokenResult) error {
	type row struct {
		Token         string    `json:"token"`
		Result        string    `json:"result"`
		Error         string    `json:"error,omitempty"`
		DeadLettered  bool      `json:"dead_lettered,omitempty"`
		AvailableAt   time.Time `json:"available_at,omitzero"`
		LeaseDeadline time.Time `json:"lease_deadline,omitzero"`
	}
	rows := make([]row, len(rs))
	for i, r := range rs {
		rows[i] = row{Token: r.Token, Result: tokenOutcome(r), DeadLettered: r.DeadLettered, AvailableAt: r.AvailableAt, LeaseDeadline: r.LeaseDeadline}
		if r.Err != nil {
			rows[i].Error = r.Err.Error()
		}
	}
	if output != outputText {
		return writeData(w, output, rows)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "TOKEN\tRESULT\tDETAIL")
	for _, r := range rows {
		var detail []string
		if r.Error != "" {
			detail = append(detail, r.Error)
		}
		if r.DeadLettered {
			detail = append(detail, "dead-lettered")
		}
		if !r.AvailableAt.IsZero() {
			detail = append(detail, "available at "+r.AvailableAt.UTC().Format(time.RFC3339Nano))
		}
		if !r.LeaseDeadline.IsZero() {
			detail = append(detail, "lease until "+r.LeaseDeadline.UTC().Format(time.RFC3339Nano))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Token, r.Result, strings.Join(detail, "; "))
	}
	return tw.Flush()
}

func tokenOutcome(r client.TokenResult) string {
	switch {
	case errors.Is(r.Err, client.ErrStaleToken):
		return "stale"
	case r.Err != nil:
		return "refused"
	case r.Duplicate:
		return "duplicate"
	}
	return "ok"
}

// tokenCallError turns the error of an ack, nack or extend into the
// command's error: partial refusals were printed per token and still fail
// the command (exit 1).
func tokenCallError(printed bool, err error) error {
	if err == nil {
		return nil
	}
	if printed {
		return fmt.Errorf("some tokens were refused: %w", err)
	}
	return err
}
