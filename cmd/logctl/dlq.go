package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newDLQCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Dead letters of a queue group: list them, and redrive them to their origin topic",
	}
	cmd.AddCommand(newDLQListCmd(opts), newDLQRedriveCmd(opts))
	return cmd
}

// dlqFlags are the selection flags shared by dlq list and redrive.
type dlqFlags struct {
	topic        string // dead-letter topic override
	reasons      []string
	since, until string
	key          string
}

func (f *dlqFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "dead-letter-topic", "", "read this topic instead of the group's dead-letter topic")
	fl.StringSliceVar(&f.reasons, "reason", nil, "only these reasons: rejected, max_deliveries, deadline_exceeded, expired (repeat or comma-separate)")
	fl.StringVar(&f.since, "since", "", "only records dead-lettered at or after this time (RFC 3339) or this long ago (e.g. 1h)")
	fl.StringVar(&f.until, "until", "", "only records dead-lettered before this time (RFC 3339) or this long ago")
	fl.StringVar(&f.key, "key", "", "only records with this key")
}

// filter parses the flags at now.
func (f *dlqFlags) filter(now time.Time) (client.DeadLetterFilter, error) {
	out := client.DeadLetterFilter{Key: f.key}
	for _, r := range f.reasons {
		switch r = strings.TrimSpace(r); r {
		case "rejected", "max_deliveries", "deadline_exceeded", "expired":
			out.Reasons = append(out.Reasons, r)
		default:
			return out, usagef("--reason %q: want rejected, max_deliveries, deadline_exceeded or expired", r)
		}
	}
	var err error
	if out.Since, err = parseWhen(f.since, now); err != nil {
		return out, usagef("--since: %w", err)
	}
	if out.Until, err = parseWhen(f.until, now); err != nil {
		return out, usagef("--until: %w", err)
	}
	return out, nil
}

// parseWhen reads an RFC 3339 time or a duration before now ("" is zero).
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a positive duration", s)
	}
	return now.Add(-d), nil
}

// deadLetterTopic is the override or the group's dead-letter topic.
func (f *dlqFlags) deadLetterTopic(cmd *cobra.Command, c *client.Client, topic, group string) (string, error) {
	if f.topic != "" {
		return f.topic, nil
	}
	d, err := c.DescribeQueueGroup(cmd.Context(), topic, group)
	if err != nil {
		return "", err
	}
	return d.Config.DeadLetterTopic, nil
}
