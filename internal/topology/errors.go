package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Parsers wrap them in a *ParseError; errors.Is finds them.
var (
	ErrSyntax          = errors.New("malformed input")
	ErrNotSquare       = errors.New("matrix is not square") // rows and columns disagree
	ErrBadNumber       = errors.New("not a number")
	ErrUnknownLinkType = errors.New("unknown link type")
	ErrNoDevices       = errors.New("no GPU devices found")
	ErrTruncated       = errors.New("input ends early") // before a table or section does
	ErrWrongTool       = errors.New("not this tool's output")
	ErrInvalidModel    = errors.New("invalid topology") // see Model.Validate
	ErrToolNotFound    = errors.New("not found on PATH")
	// ErrInconsistent: parts of the input, or two calls to one tool,
	// contradict each other.
	ErrInconsistent = errors.New("inconsistent input")
)

// ErrEmpty is an input of white space only; it wraps ErrNoDevices.
var ErrEmpty = fmt.Errorf("empty output: %w", ErrNoDevices)

// ParseError is malformed input from a source. Line is 1-based and Column
// 0-based; 0 means the whole input or line.
type ParseError struct {
	Source string // "rocm-smi --showtopo", "kfd nodes/3/properties", ...
	Line   int
	Column int
	Err    error
}

// Error prints "source: line L, column C: err", the column counted from 1
// (Column+1), leaving out a zero Column and a zero Line.
func (e *ParseError) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s: line %d, column %d: %v", e.Source, e.Line, e.Column+1, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("%s: line %d: %v", e.Source, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Source, e.Err)
}

// Unwrap returns the underlying error, usually one of the sentinels.
func (e *ParseError) Unwrap() error { return e.Err }

// ToolError is a tool that ran and failed, with its exit code and stderr
// word for word.
type ToolError struct {
	Tool     string
	Args     []string
	ExitCode int
	Stderr   string
	Err      error // the underlying exec error, if any
}

func (e *ToolError) Error() string {
	msg, _, _ := strings.Cut(strings.TrimSpace(e.Stderr), "\n")
	s := strings.Join(append([]string{e.Tool}, e.Args...), " ")
	if e.ExitCode < 0 && e.Err != nil {
		// Killed or never waited for (a timeout): the reason, not a status.
		s += ": " + e.Err.Error()
	} else {
		s += fmt.Sprintf(": exit status %d", e.ExitCode)
	}
	if msg != "" {
		s += ": " + msg
	}
	return s
}

// Unwrap returns the exec error, if any.
func (e *ToolError) Unwrap() error { return e.Err }

// Warner receives recoverable oddities (an unknown key, a missing
// numa_node); a nil Warner drops them.
type Warner func(format string, args ...any)

// Warn calls w when it is not nil.
func (w Warner) Warn(format string, args ...any) {
	if w != nil {
		w(format, args...)
	}
}

// Runner runs an external tool and returns its standard output; a tool not
// on PATH gives ErrToolNotFound and a non-zero exit a *ToolError. Sources
// take one so that they never start a process themselves.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)
