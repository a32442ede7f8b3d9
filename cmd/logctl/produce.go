package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// produceDetailLimit is how many records produce lists one by one; above
// it, it prints a per-partition summary.
const produceDetailLimit = 20

// maxLineBytes bounds one input line (one record value).
const maxLineBytes = 64 << 20

type produceFlags struct {
	key       string
	headers   []string
	partition int32
	batch     int
	file      string
	output    string
	progress  bool
	idemKey   string
	tombstone bool
}

func newProduceCmd(opts *globalOpts) *cobra.Command {
	var f produceFlags
	cmd := &cobra.Command{
		Use:   "produce TOPIC [VALUE...]",
		Short: "Append records to a topic",
		Long: `Append records to a topic. Values come from the arguments, else one per
line from --file or stdin. Each call to the server carries up to --batch
records. Prints where each record went, or a per-partition summary for more
than 20 records.

--idempotency-key K makes the append safe to repeat: a single value gets
the key K, and with several values (arguments, a file or stdin) the n-th
value gets "K-n". Within the topic's idempotency.window.ms, producing the
same values with the same key again appends nothing and reports the
original offsets as duplicates, so an interrupted import can simply be run
again.

--tombstone writes one record with --key and a null value (no values are
given): on a topic with cleanup.policy=compact, compaction then removes the
key's earlier records, and the tombstone itself after delete.retention.ms.`,
		Example: `  logctl produce orders '{"id":1}' '{"id":2}' --key customer-42
  seq 100000 | logctl produce numbers --batch 1000
  logctl produce events --file events.jsonl --header source=import
  logctl produce payments '{"id":"p-17","amount":10}' --idempotency-key p-17
  logctl produce orders --file import.jsonl --idempotency-key import-2026-11-29
  logctl produce users --key user-7 --tombstone`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.batch < 1 {
				return usagef("--batch %d: must be at least 1", f.batch)
			}
			if len(args) > 1 && f.file != "" {
				return usagef("give values as arguments or --file, not both")
			}
			if f.tombstone && (len(args) > 1 || f.file != "") {
				return usagef("--tombstone writes a null value: give no values and no --file")
			}
			if f.tombstone && !cmd.Flags().Changed("key") {
				return usagef("--tombstone needs --key: it marks that key's records for removal by compaction")
			}
			tmpl, err := f.template(cmd)
			if err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()

			var src valueSource
			var total int64
			switch {
			case f.tombstone:
				src = &tombstoneSource{}
			case len(args) > 1:
				src = &argSource{values: args[1:]}
			case f.file != "":
				file, err := os.Open(f.file)
				if err != nil {
					return err
				}
				defer file.Close()
				if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
					total = fi.Size()
				}
				src = newLineSource(file)
			default:
				if file, ok := opts.stdin.(*os.File); ok {
					if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
						total = fi.Size()
					}
				}
				src = newLineSource(opts.stdin)
			}
			prog := opts.newProgress(f.progress || isTerminal(opts.stderr), total, "records")
			prog.Start()
			var keyFor func(n int64) string
			if f.idemKey != "" {
				single := len(args) == 2 || f.tombstone
				keyFor = func(n int64) string {
					if single {
						return f.idemKey
					}
					return fmt.Sprintf("%s-%d", f.idemKey, n)
				}
			}
			sum, err := produceAll(cmd.Context(), c, args[0], tmpl, src, f.batch, keyFor, prog)
			prog.Stop()
			if err != nil {
				if sum.records > 0 {
					opts.logf("%s produced before the failure", count(sum.records, "record"))
				}
				return err
			}
			return sum.print(opts.stdout, f.output, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.key, "key", "k", "", "key of every record (default: no key)")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "header key=value on every record (repeatable)")
	fl.Int32VarP(&f.partition, "partition", "p", -1, "partition (default: by key, else round-robin)")
	fl.IntVar(&f.batch, "batch", 500, "records per call")
	fl.StringVarP(&f.file, "file", "f", "", "read values from this file, one per line")
	fl.StringVar(&f.idemKey, "idempotency-key", "", "idempotency key (several values: KEY-1, KEY-2, ... in input order)")
	fl.BoolVar(&f.tombstone, "tombstone", false, "write one record with --key and a null value (a compaction tombstone); takes no values")
	fl.BoolVar(&f.progress, "progress", false, "show progress on stderr even when it is not a terminal")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// template returns the record every value is put into.
func (f *produceFlags) template(cmd *cobra.Command) (client.Record, error) {
	var r client.Record
	if cmd.Flags().Changed("key") {
		r.Key = []byte(f.key)
	}
	hs, err := parsePairs("--header", f.headers)
	if err != nil {
		return r, err
	}
	for _, h := range hs {
		r.Headers = append(r.Headers, client.Header{Key: h[0], Value: []byte(h[1])})
	}
	if cmd.Flags().Changed("partition") {
		if f.partition < 0 {
			return r, usagef("--partition %d: must not be negative", f.partition)
		}
		p := f.partition
		r.Partition = &p
	}
	return r, nil
}

// valueSource yields record values; next returns io.EOF at the end and the
// number of input bytes consumed (for progress).
type valueSource interface {
	next() (value []byte, consumed int64, err error)
}

type argSource struct{ values []string }

func (s *argSource) next() ([]byte, int64, error) {
	if len(s.values) == 0 {
		return nil, 0, io.EOF
	}
	v := s.values[0]
	s.values = s.values[1:]
	return []byte(v), int64(len(v)), nil
}

// tombstoneSource yields one null value.
type tombstoneSource struct{ done bool }

func (s *tombstoneSource) next() ([]byte, int64, error) {
	if s.done {
		return nil, 0, io.EOF
	}
	s.done = true
	return nil, 0, nil
}

// lineSource yields one value per line, without the line ending ("\n" or
// "\r\n"). A last line without a newline counts; an empty line is an empty
// value.
type lineSource struct{ r *bufio.Reader }

func newLineSource(r io.Reader) *lineSource {
	return &lineSource{r: bufio.NewReaderSize(r, 64<<10)}
}

func (s *lineSource) next() ([]byte, int64, error) {
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLineBytes {
			return nil, 0, fmt.Errorf("input line longer than %d bytes", maxLineBytes)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF && len(line) > 0 {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		break
	}
	n := int64(len(line))
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, n, nil
}

// produceSummary is what produce reports.
type produceSummary struct {
	records int64
	results []client.Result // the first produceDetailLimit+1 results
	parts   map[int32]*partitionSummary
	// duplicates counts records answered from the idempotency window.
	duplicates int64
}

type partitionSummary struct {
	Partition   int32 `json:"partition"`
	Records     int64 `json:"records"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
}

func (s *produceSummary) add(res []client.Result) {
	for _, r := range res {
		if r.Duplicate {
			s.duplicates++
		}
		if len(s.results) <= produceDetailLimit {
			s.results = append(s.results, r)
		}
		p := s.parts[r.Partition]
		if p == nil {
			p = &partitionSummary{Partition: r.Partition, FirstOffset: r.Offset}
			s.parts[r.Partition] = p
		}
		p.Records++
		p.FirstOffset = min(p.FirstOffset, r.Offset)
		p.LastOffset = max(p.LastOffset, r.Offset)
	}
	s.records += int64(len(res))
}

// produceAll sends every value of src in calls of up to batch records.
// keyFor, if not nil, gives the n-th value (from 1) its idempotency key.
func produceAll(ctx context.Context, c *client.Client, topic string, tmpl client.Record, src valueSource, batch int, keyFor func(n int64) string, prog *progress) (*produceSummary, error) {
	sum := &produceSummary{parts: make(map[int32]*partitionSummary)}
	recs := make([]client.Record, 0, batch)
	var consumed, size, seq int64
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		res, err := c.Produce(ctx, topic, recs)
		if err != nil {
			return err
		}
		sum.add(res)
		prog.Add(consumed, int64(len(recs)), size)
		recs, consumed, size = recs[:0], 0, 0
		return nil
	}
	for {
		v, n, err := src.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sum, err
		}
		r := tmpl
		r.Value = v
		seq++
		if keyFor != nil {
			r.IdempotencyKey = keyFor(seq)
		}
		recs = append(recs, r)
		consumed += n
		size += int64(len(v))
		if len(recs) == batch {
			if err := flush(); err != nil {
				return sum, err
			}
		}
	}
	if err := flush(); err != nil {
		return sum, err
	}
	if sum.records == 0 {
		return sum, errors.New("no records to produce (no values given and the input is empty)")
	}
	return sum, nil
}

func (s *produceSummary) print(w io.Writer, output, topic string) error {
	detailed := s.records <= produceDetailLimit
	parts := make([]partitionSummary, 0, len(s.parts))
	for _, p := range s.parts {
		parts = append(parts, *p)
	}
	slices.SortFunc(parts, func(a, b partitionSummary) int { return int(a.Partition - b.Partition) })
	if output != outputText {
		out := struct {
			Topic      string             `json:"topic"`
			Records    int64              `json:"records"`
			Duplicates int64              `json:"duplicates,omitempty"`
			Results    []client.Result    `json:"results,omitempty"`
			Partitions []partitionSummary `json:"partitions"`
		}{Topic: topic, Records: s.records, Duplicates: s.duplicates, Partitions: parts}
		if detailed {
			out.Results = s.results
		}
		return writeData(w, output, out)
	}
	tw := newTable(w)
	if detailed {
		if s.duplicates == 0 {
			fmt.Fprintln(tw, "PARTITION\tOFFSET")
			for _, r := range s.results {
				fmt.Fprintf(tw, "%d\t%d\n", r.Partition, r.Offset)
			}
			return tw.Flush()
		}
		fmt.Fprintln(tw, "PARTITION\tOFFSET\tDUPLICATE")
		for _, r := range s.results {
			dup := "no"
			if r.Duplicate {
				dup = "yes (already written)"
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\n", r.Partition, r.Offset, dup)
		}
		return tw.Flush()
	}
	fmt.Fprintf(w, "produced %s to %s\n", count(s.records, "record"), topic)
	if s.duplicates > 0 {
		fmt.Fprintf(w, "%d of them were duplicates of records already written (idempotency keys); nothing was appended for those\n", s.duplicates)
	}
	fmt.Fprintln(tw, "PARTITION\tRECORDS\tFIRST OFFSET\tLAST OFFSET")
	for _, p := range parts {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\n", p.Partition, p.Records, p.FirstOffset, p.LastOffset)
	}
	return tw.Flush()
}
