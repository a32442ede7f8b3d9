package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// Output formats of --output.
const (
	outputText = "text"
	outputJSON = "json"
)

// addOutputFlag adds --output to a command that prints data.
func addOutputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", outputText, "output format: text or json")
}

// checkOutput validates an --output value.
func checkOutput(out string) error {
	if out != outputText && out != outputJSON {
		return fmt.Errorf("--output %q: want text or json", out)
	}
	return nil
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a writer aligning tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}
