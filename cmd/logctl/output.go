package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

// Output formats of --output.
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

// addOutputFlag adds --output to a command that prints data.
func addOutputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", outputText, "output format: text, json or yaml")
}

// checkOutput validates an --output value.
func checkOutput(out string) error {
	if out != outputText && out != outputJSON && out != outputYAML {
		return usagef("--output %q: want text, json or yaml", out)
	}
	return nil
}

// writeData writes v in the structured --output format (json or yaml;
// encode.go says how values are converted).
func writeData(w io.Writer, output string, v any) error {
	tree, err := toTree(v)
	if err != nil {
		return err
	}
	return writeTree(w, output, tree)
}

// keyText is a record's key in a table: quoted, so an empty key ("") is
// told apart from a record without one (-), in every command that prints
// keys (consume --meta, queue claim, dlq list, dlq redrive).
func keyText(key []byte) string {
	if key == nil {
		return "-"
	}
	return strconv.Quote(string(key))
}

// newTable returns a writer aligning tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

// newListCmd makes a "list" command without arguments: it fetches rows
// with list and prints them as a table (header, then row(r) per row; both
// tab-separated) or, with --output json, as a JSON array ([] when empty).
// list takes the client first so a method expression such as
// (*client.Client).ListTopics fits.
func newListCmd[T any](opts *globalOpts, short, example, header string, list func(*client.Client, context.Context) ([]T, error), row func(T) string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   short,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.withClient(output, func(c *client.Client) error {
				rows, err := list(c, cmd.Context())
				if err != nil {
					return err
				}
				if output != outputText {
					if rows == nil {
						rows = []T{}
					}
					return writeData(opts.stdout, output, rows)
				}
				tw := newTable(opts.stdout)
				fmt.Fprintln(tw, header)
				for _, r := range rows {
					fmt.Fprintln(tw, row(r))
				}
				return tw.Flush()
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// withClient checks the --output value, then runs fn with a client that is
// closed when fn returns: the opening of most commands.
func (o *globalOpts) withClient(output string, fn func(*client.Client) error) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	c, err := o.newClient()
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// count is "1 noun" or "n nouns", for messages about a number of things.
func count[T int | int32 | int64](n T, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeRecord writes one of a stream of values (consumed or claimed
// records): JSON as one compact line, YAML as a document opened by "---",
// so that a reader can handle each as it comes.
func writeRecord(w io.Writer, output string, v any) error {
	tree, err := toTree(v)
	if err != nil {
		return err
	}
	if output == outputYAML {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		return writeTree(w, output, tree)
	}
	b, err := json.Marshal(tree)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// configValueText is a topic setting's value as tables print it: the
// value as set, which is what --config takes, followed for a duration
// (*.ms) or a size (*.bytes) by the same in human units when they read
// differently: "604800000 (7d)", "1073741824 (1.0 GiB)"; -1, no bound, of
// those and of a count (*.records) is "-1 (unbounded)". Structured output
// keeps the value alone.
func configValueText(key, value string) string {
	isMs, isBytes := strings.HasSuffix(key, ".ms"), strings.HasSuffix(key, ".bytes")
	if !isMs && !isBytes && !strings.HasSuffix(key, ".records") {
		return value
	}
	n, err := strconv.ParseInt(value, 10, 64)
	switch {
	case err != nil:
		return value
	case n < 0:
		return value + " (unbounded)"
	case isMs && n >= 1000 && n <= math.MaxInt64/int64(time.Millisecond):
		return value + " (" + humanDuration(time.Duration(n)*time.Millisecond) + ")"
	case isBytes && n >= 1024:
		return value + " (" + formatBytes(n) + ")"
	}
	return value
}

// humanDuration prints a duration with days and without zero units:
// "7d", "1d2h", "1h30m", "1.5s".
func humanDuration(d time.Duration) string {
	const day = 24 * time.Hour
	var s string
	if d >= day {
		s = fmt.Sprintf("%dd", d/day)
		d %= day
		if d == 0 {
			return s
		}
	}
	r := d.String()
	if strings.HasSuffix(r, "m0s") {
		r = strings.TrimSuffix(r, "0s")
	}
	if strings.HasSuffix(r, "h0m") {
		r = strings.TrimSuffix(r, "0m")
	}
	return s + r
}
