package topology

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// LineCol turns a byte offset into data into a 1-based line, 0-based column.
func LineCol(data []byte, off int64) (int, int) {
	b := data[:max(0, min(off, int64(len(data))))]
	return 1 + bytes.Count(b, []byte("\n")), len(b) - 1 - bytes.LastIndexByte(b, '\n')
}

// Field is a token of a line and the 0-based byte column it starts at.
type Field struct {
	S   string
	Col int
}

// Texts returns the text of each field.
func Texts(fs []Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.S
	}
	return out
}

// CountCol is the error column of a row fs that should hold n fields: the
// first one too many, else the end of line.
func CountCol(line string, fs []Field, n int) int {
	if len(fs) > n {
		return fs[n].Col
	}
	return len(line)
}

// SplitFields splits line at runs of spaces, tabs and carriage returns.
func SplitFields(line string) []Field {
	return SplitFieldsFunc(line, func(c rune) bool { return c == ' ' || c == '\t' || c == '\r' })
}

// SplitFieldsFunc splits line at runs of runes for which sep is true.
func SplitFieldsFunc(line string, sep func(rune) bool) []Field {
	var out []Field
	start := -1
	for i, c := range line {
		switch {
		case sep(c) && start >= 0:
			out = append(out, Field{line[start:i], start})
			start = -1
		case !sep(c) && start < 0:
			start = i
		}
	}
	if start >= 0 {
		out = append(out, Field{line[start:], start})
	}
	return out
}

// MaxLineLength is the longest line a LineReader accepts (a 256-GPU matrix
// row fits); a longer one is an error, not an unbounded allocation.
const MaxLineLength = 1 << 20

// LineReader is what every text parser reads its input through, as
// encoding/csv's Reader is for CSV; Errorf makes the current line's *ParseError.
type LineReader struct {
	Source string // the input in the reader's errors ("rocm-smi --showtopo")

	sc           *bufio.Scanner
	line         int
	text         string
	unterminated bool
	lastCut      bool // the split function saw a last line without '\n'
	has          bool // Next returned the current line
	again        bool // Unread: Next returns the current line again
}

// NewLineReader returns a LineReader over r whose errors name source.
func NewLineReader(r io.Reader, source string) *LineReader {
	lr := &LineReader{Source: source, sc: bufio.NewScanner(r)}
	lr.sc.Buffer(make([]byte, 64*1024), MaxLineLength)
	lr.sc.Split(lr.split)
	return lr
}

// split is bufio.ScanLines that also notes a last line without a newline.
func (lr *LineReader) split(data []byte, atEOF bool) (int, []byte, error) {
	adv, tok, err := bufio.ScanLines(data, atEOF)
	lr.lastCut = lr.lastCut || atEOF && tok != nil && bytes.IndexByte(data[:adv], '\n') < 0
	return adv, tok, err
}

// Next advances to the next line and reports whether there is one (false
// at the end of input and on a read error: see Err).
func (lr *LineReader) Next() bool {
	if lr.again {
		lr.again = false
		lr.line++
		return true
	}
	if !lr.sc.Scan() {
		lr.text, lr.has = "", false
		return false
	}
	lr.line++
	lr.text, lr.has = strings.TrimRight(lr.sc.Text(), "\r"), true
	lr.unterminated = lr.lastCut
	return true
}

// Unread hands the current line back (one at most) to the next Next.
func (lr *LineReader) Unread() {
	if lr.has && !lr.again {
		lr.again = true
		lr.line--
	}
}

// ForEach calls f with each remaining line; it returns f's first error,
// else Err.
func (lr *LineReader) ForEach(f func(line string) error) error {
	for lr.Next() {
		if err := f(lr.text); err != nil {
			return err
		}
	}
	return lr.Err()
}

// Text returns the current line without its line end.
func (lr *LineReader) Text() string { return lr.text }

// Line returns the current line's 1-based number (0 before the first Next).
func (lr *LineReader) Line() int { return lr.line }

// Terminated reports whether the current line ended with a newline (only
// a cut-off output's last line does not).
func (lr *LineReader) Terminated() bool { return !lr.unterminated }

// Err returns what stopped Next other than the end of input: a line
// longer than MaxLineLength (a *ParseError), or the reader's error.
func (lr *LineReader) Err() error {
	err := lr.sc.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bufio.ErrTooLong):
		return NewParseError(lr.Source, lr.line+1, 0, ErrSyntax, "line longer than %d bytes", MaxLineLength)
	}
	return fmt.Errorf("%s: %w", lr.Source, err)
}

// Errorf is NewParseError at the reader's Source and current line.
func (lr *LineReader) Errorf(col int, err error, format string, args ...any) error {
	return NewParseError(lr.Source, lr.line, col, err, format, args...)
}

// NewParseError is the one way a *ParseError is made; its Err wraps err
// with the formatted detail when format is not "".
func NewParseError(source string, line, col int, err error, format string, args ...any) *ParseError {
	if format != "" {
		err = fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))
	}
	return &ParseError{Source: source, Line: line, Column: col, Err: err}
}

// LazyRegexp is expr compiled at its first use: at start-up it would cost
// every amdrun process (the guards too) about 0.4 ms per parser.
func LazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// NormalizePCI turns a PCI address as tools print it ("00000000:18:00.0",
// "0000:0C:00.0", rocm_bandwidth_test's "18:00.0") into the model's form,
// "0000:18:00.0"; false when s is not [domain:]bus:device.function.
func NormalizePCI(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if strings.Count(s, ":") == 1 {
		s = "0:" + s
	}
	parts := strings.Split(s, ":")
	dev, fn, ok := strings.Cut(parts[len(parts)-1], ".")
	if len(parts) != 3 || !ok {
		return "", false
	}
	dom, bus := parts[0], parts[1]
	d, err1 := strconv.ParseUint(dom, 16, 32)
	b, err2 := strconv.ParseUint(bus, 16, 8)
	v, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 16, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || len(dom) > 8 || len(bus) > 2 || len(dev) > 2 || len(fn) > 1 || v > 0x1f || f > 7 {
		return "", false
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, v, f), true
}
