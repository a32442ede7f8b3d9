package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newQueueClaimCmd(opts *globalOpts) *cobra.Command {
	var (
		max    int
		lease  time.Duration
		wait   time.Duration
		worker string
		output string
	)
	cmd := &cobra.Command{
		Use:   "claim TOPIC GROUP",
		Short: "Lease records of a queue group and print them with their tokens",
		Example: `  logctl queue claim payments workers --max 10 --lease 1m --output json
  logctl queue claim payments workers --worker billing-7
  logctl queue ack payments workers TOKEN...`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				res, err := c.Claim(cmd.Context(), client.ClaimRequest{Topic: args[0], Group: args[1], MaxRecords: max, Lease: lease, MaxWait: wait, Worker: worker})
				if err != nil {
					return err
				}
				if res.Paused {
					opts.logf("queue group %s on %s is paused: it delivers nothing until `logctl queue resume %s %s`", args[1], args[0], args[0], args[1])
				}
				if len(res.AtCap) > 0 {
					opts.logf("partitions %v are at their in-flight cap: records are waiting", res.AtCap)
				}
				if output != outputText {
					for _, j := range res.Jobs {
						if err := writeRecord(opts.stdout, output, claimJSON(j)); err != nil {
							return err
						}
					}
					return nil
				}
				tw := newTable(opts.stdout)
				fmt.Fprintln(tw, "PARTITION\tOFFSET\tDELIVERY\tLEASE UNTIL\tTOKEN\tKEY\tVALUE")
				for _, j := range res.Jobs {
					fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\n", j.Partition, j.Offset, j.Delivery, j.LeaseDeadline.UTC().Format(time.RFC3339Nano), j.Token, keyText(j.Key), printable(j.Value))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&max, "max", 1, "records to claim (1 to 10000)")
	cmd.Flags().DurationVar(&lease, "lease", 0, "lease of each record (default: the group's)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for a record when none is claimable")
	cmd.Flags().StringVar(&worker, "worker", "", "name the claiming worker (shown by queue describe --in-flight and in the dead letter's attempt history; at most 128 bytes)")
	addOutputFlag(cmd, &output)
	return cmd
}

// claimJSONRecord is one claimed record in --output json (one JSON object
// per line, like consume).
type claimJSONRecord struct {
	Topic         string            `json:"topic"`
	Group         string            `json:"group"`
	Partition     int32             `json:"partition"`
	Offset        int64             `json:"offset"`
	Timestamp     time.Time         `json:"timestamp"`
	Key           *string           `json:"key"`
	Value         *string           `json:"value"`
	Headers       []jsonQueueHeader `json:"headers,omitempty"`
	Token         string            `json:"token"`
	Delivery      int               `json:"delivery"`
	LeaseDeadline time.Time         `json:"lease_deadline"`
	FirstDelivery time.Time         `json:"first_delivery"`
}

type jsonQueueHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func claimJSON(j client.Job) claimJSONRecord {
	str := func(b []byte) *string {
		if b == nil {
			return nil
		}
		s := string(b)
		return &s
	}
	out := claimJSONRecord{Topic: j.Topic, Group: j.Group, Partition: j.Partition, Offset: j.Offset, Timestamp: j.Timestamp.UTC(),
		Key: str(j.Key), Value: str(j.Value), Token: j.Token, Delivery: j.Delivery,
		LeaseDeadline: j.LeaseDeadline.UTC(), FirstDelivery: j.FirstDelivery.UTC()}
	for _, h := range j.Headers {
		out.Headers = append(out.Headers, jsonQueueHeader{Key: h.Key, Value: string(h.Value)})
	}
	return out
}

// printable shows a key or value in a table: "-" for null.
func printable(b []byte) string {
	if b == nil {
		return "-"
	}
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}
