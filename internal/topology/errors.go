package topology

import (
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
	// ErrInconsistent: parts of the input, or the outputs of two calls to
	// one tool, contradict each other (a swapped matrix column, a GPU one
	// call lists and another does not).
	ErrInconsistent = errors.New("inconsistent input")
)

// ErrEmpty is an input with nothing but white space: the tool printed
// nothing. It wraps ErrNoDevices, so errors.Is finds either.
var ErrEmpty = fmt.Errorf("empty output: %w", ErrNoDevices)

// ParseError is malformed input from a source. Line is 1-based (0 when
// the error is about the whole input); Column is 0-based, and 0 also when
// the error is about the whole line.
type ParseError struct {
	Source string // "rocm-smi --showtopo", "kfd nodes/3/properties", ...
	Line   int
	Column int
	Err    error
}

// Error prints "source: line L, column C: err", with the column counted
// from 1 as editors do (Column+1); the column is left out when Column is
// 0 (the start of the line, or unknown) and the line when Line is 0.
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

// ToolError is a tool that ran and failed: it keeps the exit code and the
// tool's stderr word for word.
type ToolError struct {
	Tool     string
	Args     []string
	ExitCode int
	Stderr   string
	Err      error // the underlying exec error, if any
}

func (e *ToolError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
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
// numa_node). A nil Warner drops them.
type Warner func(format string, args ...any)

// Warn calls w when it is not nil.
func (w Warner) Warn(format string, args ...any) {
	if w != nil {
		w(format, args...)
	}
}
