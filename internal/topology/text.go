package topology

import (
	"bufio"
	"io"
)

// Helpers shared by the text parsers of the source packages.

// LineCol turns a byte offset into data into a 1-based line and a 0-based
// column, for ParseError positions.
func LineCol(data []byte, off int64) (int, int) {
	line, col := 1, 0
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line, col = line+1, 0
		} else {
			col++
		}
	}
	return line, col
}

// Field is one whitespace-separated token of a line and its 0-based column.
type Field struct {
	S   string
	Col int
}

// SplitFields splits line at runs of spaces, tabs and carriage returns,
// keeping each token's column.
func SplitFields(line string) []Field {
	var out []Field
	start := -1
	for i := 0; i <= len(line); i++ {
		space := i == len(line) || line[i] == ' ' || line[i] == '\t' || line[i] == '\r'
		switch {
		case space && start >= 0:
			out = append(out, Field{line[start:i], start})
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	return out
}

// NewScanner returns a line scanner that accepts lines up to 1 MiB (tool
// output can have long lines; a longer one is an error, not a hang).
func NewScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	return sc
}
