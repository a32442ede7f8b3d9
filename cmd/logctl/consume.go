package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// followWait is the long-poll wait of each fetch while following.
const followWait = 5 * time.Second

type consumeFlags struct {
	partition int32
	from      string
	follow    bool
	max       int64
	timeout   time.Duration
	output    string
	meta      bool
	group     string // consume as a member of this consumer group (group_consume.go)
	reset     string // the group's reset policy (--reset-policy)
	// consistent: every read (the end offsets at start, each fetch) holds
	// every write acknowledged before it, through any node.
	consistent bool
}

func newConsumeCmd(opts *globalOpts) *cobra.Command {
	var f consumeFlags
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records of a topic",
		Long: `Print records of one partition (--partition) or of all partitions, from
--from up to the end offsets seen at start, or with --follow, waiting for new
records until interrupted, --max records or --timeout without records.

Records of one partition come in offset order; partitions interleave. Text
output prints each value on a line (--meta adds partition, offset, time and
key); json prints one object per line with topic, partition, offset,
timestamp, key, value and headers, where bytes that are not UTF-8 are base64
and flagged with key_encoding / value_encoding "base64".

--from accepts earliest, latest, an offset, or an RFC 3339 time; a time
starts at the first record stamped at or after it, found by the server's
time index. An offset past a partition's end offset is an error that gives
the partition's bounds (the end itself is accepted: it reads new records).

With --group G, consume joins consumer group G, reads the partitions the
server assigns from the group's committed offsets and commits what it
printed. --reset-policy (earliest, latest or none; --from earliest or latest
says the same) picks where the group starts without a committed offset, and
where it goes when retention has removed the records at its committed
offset: such a skip is reported on stderr with the offsets skipped; with
none it is an error instead. Without --follow it stops once every partition assigned to it is
read up to the end offsets seen at start (an empty poll is not the end: the
group may still have lag), and leaves the group.

Through a follower, consume sees every record acknowledged through that
node before it started; --consistent makes it see every record
acknowledged through any node (each read then asks the leader).`,
		Example: `  logctl consume orders --from earliest
  logctl consume orders --partition 2 --from 1200 --max 10 --output json
  logctl consume orders --from 2026-01-02T15:04:05Z --follow --timeout 30s
  logctl consume orders --group billing --reset-policy none`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.max < 0 || f.timeout < 0 {
				return usagef("--max and --timeout must not be negative")
			}
			if !cmd.Flags().Changed("partition") {
				f.partition = -1
			} else if f.partition < 0 {
				return usagef("--partition %d: must not be negative", f.partition)
			}
			start, err := parseFrom(f.from)
			if err != nil {
				return err
			}
			opts.consistentReads = f.consistent
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if f.group != "" {
				return consumeGroup(cmd, opts, c, args[0], &f)
			}
			if f.reset != "" {
				return usagef("--reset-policy needs --group: without a group, --from says where to start")
			}
			return consume(cmd.Context(), opts, c, args[0], start, &f)
		},
	}
	fl := cmd.Flags()
	fl.Int32VarP(&f.partition, "partition", "p", 0, "partition to read (default: all)")
	fl.StringVar(&f.from, "from", "earliest", "start: earliest, latest, an offset, or an RFC 3339 time")
	fl.BoolVarP(&f.follow, "follow", "F", false, "keep waiting for new records")
	fl.Int64VarP(&f.max, "max", "n", 0, "stop after this many records (0: no limit)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop when no record arrives for this long (0: never)")
	fl.BoolVar(&f.meta, "meta", false, "text output: prefix each value with partition, offset, time and key")
	fl.StringVar(&f.group, "group", "", "consume as a member of this consumer group, from its committed offsets, committing after each printed batch")
	fl.StringVar(&f.reset, "reset-policy", "", "with --group: where to start without a committed offset, and where to go when retention removed the records at it: earliest, latest or none (an error) (default earliest, or --from's)")
	fl.BoolVar(&f.consistent, "consistent", false, "read linearizably: see every record acknowledged before each read, through any node (each read asks the leader)")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// startPos is a parsed --from.
type startPos struct {
	offset int64     // an offset, client.OffsetEarliest or client.OffsetLatest
	time   time.Time // set for a time
}

func parseFrom(s string) (startPos, error) {
	switch s {
	case "earliest", "beginning":
		return startPos{offset: client.OffsetEarliest}, nil
	case "latest", "end":
		return startPos{offset: client.OffsetLatest}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return startPos{}, usagef("--from %d: offsets are not negative", n)
		}
		return startPos{offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return startPos{time: t}, nil
	}
	return startPos{}, usagef("--from %q: want earliest, latest, an offset or an RFC 3339 time", s)
}

// partitionRead is the plan for one partition.
type partitionRead struct {
	partition int32
	start     int64
	stop      int64 // first offset not to read; -1 when following
}

func consume(ctx context.Context, opts *globalOpts, c *client.Client, topic string, from startPos, f *consumeFlags) error {
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return err
	}
	if f.partition >= int32(len(d.Partitions)) {
		return fmt.Errorf("topic %q has no partition %d (it has %d): %w", topic, f.partition, len(d.Partitions), client.ErrUnknownPartition)
	}
	var plans []partitionRead
	var past []string // partitions an explicit --from offset is past the end of
	for _, p := range d.Partitions {
		if f.partition >= 0 && p.Partition != f.partition {
			continue
		}
		if from.time.IsZero() && from.offset >= 0 && from.offset > p.End {
			// Nothing was ever written there: waiting (--follow) could
			// only end in the server's out-of-range refusal, and
			// printing nothing would look like an empty partition.
			past = append(past, fmt.Sprintf("partition %d: log start %d, end %d", p.Partition, p.LogStart, p.End))
			continue
		}
		pr := partitionRead{partition: p.Partition, stop: -1}
		switch {
		case !from.time.IsZero():
			if pr.start, err = c.OffsetForTime(ctx, topic, p.Partition, from.time); err != nil {
				return err
			}
		case from.offset == client.OffsetEarliest:
			pr.start = p.LogStart
		case from.offset == client.OffsetLatest:
			pr.start = p.End
		default:
			pr.start = from.offset
		}
		if !f.follow {
			pr.stop = p.End
			if pr.start >= pr.stop {
				continue
			}
		}
		plans = append(plans, pr)
	}
	if len(past) > 0 {
		// Not a usage error: it depends on what the topic holds now.
		return fmt.Errorf("--from %d is past the end of %q (%s); the highest --from is the end, where only new records are read",
			from.offset, topic, strings.Join(past, "; "))
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []client.FetchedRecord)
	errs := make(chan error, len(plans))
	var wg sync.WaitGroup
	for _, pr := range plans {
		wg.Go(func() {
			if err := readPartition(ctx, opts, c, topic, pr, batches); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	allDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(allDone)
	}()
	defer func() {
		cancel()
		<-allDone
	}()

	pr := newRecordPrinter(opts.stdout, f.output, f.meta)
	var idle <-chan time.Time
	var idleTimer *time.Timer
	if f.timeout > 0 {
		idleTimer = time.NewTimer(f.timeout)
		defer idleTimer.Stop()
		idle = idleTimer.C
	}
	var n int64
	for {
		select {
		case recs := <-batches:
			for _, r := range recs {
				if err := pr.print(r); err != nil {
					return err
				}
				n++
				if f.max > 0 && n >= f.max {
					return pr.flush()
				}
			}
			if err := pr.flush(); err != nil {
				return err
			}
			if idleTimer != nil {
				idleTimer.Reset(f.timeout)
			}
		case err := <-errs:
			return err
		case <-allDone:
			select {
			case err := <-errs:
				return err
			default:
			}
			return pr.flush()
		case <-idle:
			return pr.flush()
		case <-ctx.Done():
			// Interrupted: what was printed stands; not a failure.
			return pr.flush()
		}
	}
}

// readPartition sends the records of one partition's plan to out, in
// offset order, until its stop offset or ctx's end.
func readPartition(ctx context.Context, opts *globalOpts, c *client.Client, topic string, pr partitionRead, out chan<- []client.FetchedRecord) error {
	cs, err := c.NewConsumer(client.ConsumerOptions{Topic: topic, Partition: pr.partition, Offset: pr.start, MaxWait: followWait})
	if err != nil {
		return err
	}
	for pr.stop < 0 || cs.Position() < pr.stop {
		recs, err := cs.Poll(ctx)
		var oor *client.OutOfRangeError
		if errors.As(err, &oor) && cs.Position() < oor.LogStart {
			opts.logf("partition %d: offset %d was removed by retention; skipping to %d", pr.partition, cs.Position(), oor.LogStart)
			cs.SetPosition(oor.LogStart)
			continue
		}
		if err != nil {
			return err
		}
		if pr.stop >= 0 {
			for i, r := range recs {
				if r.Offset >= pr.stop {
					recs = recs[:i]
					break
				}
			}
		}
		if len(recs) == 0 {
			continue
		}
		select {
		case out <- recs:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// recordPrinter writes consumed records as text or JSON lines.
type recordPrinter struct {
	w      io.Writer
	output string
	meta   bool
	buf    bytes.Buffer
}

func newRecordPrinter(w io.Writer, output string, meta bool) *recordPrinter {
	return &recordPrinter{w: w, output: output, meta: meta}
}

// jsonRecord is the --output json and yaml form of a consumed record.
type jsonRecord struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
	recordBytes
}

// recordBytes is the one structured form of a record's key, value and
// headers, shared by every command that prints records (consume, dlq
// list): UTF-8 bytes as a string, other bytes as base64 flagged by
// *_encoding "base64", and null for a null key or value.
type recordBytes struct {
	Key           *string      `json:"key"`
	KeyEncoding   string       `json:"key_encoding,omitempty"`
	Value         *string      `json:"value"`
	ValueEncoding string       `json:"value_encoding,omitempty"`
	Headers       []jsonHeader `json:"headers,omitempty"`
}

type jsonHeader struct {
	Key           string  `json:"key"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"value_encoding,omitempty"`
}

func newRecordBytes(key, value []byte, headers []client.Header) recordBytes {
	var rb recordBytes
	rb.Key, rb.KeyEncoding = encodeBytes(key)
	rb.Value, rb.ValueEncoding = encodeBytes(value)
	for _, h := range headers {
		jh := jsonHeader{Key: h.Key}
		jh.Value, jh.ValueEncoding = encodeBytes(h.Value)
		rb.Headers = append(rb.Headers, jh)
	}
	return rb
}

// encodeBytes returns b as a UTF-8 string or, if it is not valid UTF-8, as
// base64 with encoding "base64"; nil stays nil (JSON null).
func encodeBytes(b []byte) (s *string, encoding string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		v := string(b)
		return &v, ""
	}
	v := base64.StdEncoding.EncodeToString(b)
	return &v, "base64"
}

func (p *recordPrinter) print(r client.FetchedRecord) error {
	if p.output != outputText {
		jr := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(),
			recordBytes: newRecordBytes(r.Key, r.Value, r.Headers)}
		if p.output == outputJSON {
			// jsonRecord follows encode.go's rules as it is; encoding/json
			// is the faster way to the same line.
			b, err := json.Marshal(jr)
			if err != nil {
				return err
			}
			p.buf.Write(b)
			p.buf.WriteByte('\n')
		} else if err := writeRecord(&p.buf, p.output, jr); err != nil {
			return err
		}
	} else {
		if p.meta {
			fmt.Fprintf(&p.buf, "%d:%d\t%s\t%s\t", r.Partition, r.Offset, r.Timestamp.UTC().Format(time.RFC3339Nano), keyText(r.Key))
		}
		p.buf.Write(r.Value)
		p.buf.WriteByte('\n')
	}
	if p.buf.Len() > 64<<10 {
		return p.flush()
	}
	return nil
}

func (p *recordPrinter) flush() error {
	if p.buf.Len() == 0 {
		return nil
	}
	_, err := p.buf.WriteTo(p.w)
	return err
}
