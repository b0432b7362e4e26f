package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
)

// Warnf prints every warning: "amdrun: warning: MESSAGE" on stderr, one
// line, unless io.Quiet (-q).
func Warnf(io *iostreams.IOStreams, format string, args ...any) {
	if io.Quiet {
		return
	}
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	fmt.Fprintf(io.ErrOut, "amdrun: warning: %s\n", msg)
}

// PrintJSON writes v to w as indented JSON, as every --json prints.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// NewTable is the tabwriter that aligns every table amdrun prints.
func NewTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// PrintRows prints rows, each cell's whitespace folded to one space so a
// row stays a line: aligned on a terminal, tab-separated to a pipe.
func PrintRows(s *iostreams.IOStreams, rows [][]string) error {
	var w io.Writer = s.Out
	tw := NewTable(s.Out)
	if s.IsStdoutTTY() {
		w = tw
	}
	for _, row := range rows {
		for k, c := range row {
			row[k] = strings.Join(strings.Fields(c), " ")
		}
		if _, err := fmt.Fprintln(w, strings.Join(row, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}
