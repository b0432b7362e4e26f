// Package iostreams is where commands write: standard streams and whether
// they are terminals (a table for people, tab-separated lines for pipes).
package iostreams

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// IOStreams holds a command's input and output streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// Quiet silences warnings (-q/--quiet); errors still print.
	Quiet bool

	stdoutTTY bool
	stderrTTY bool
	// width is Out's terminal's columns, 0 when none or unknown.
	width int
}

// DefaultWidth is the width help is wrapped to when Out is not a
// terminal (torchrun's argparse wraps at 78).
const DefaultWidth = 80

// Width is the columns help is wrapped to: Out's terminal's, else DefaultWidth.
func (s *IOStreams) Width() int {
	if s.stdoutTTY && s.width > 0 {
		return s.width
	}
	return DefaultWidth
}

// IsStdoutTTY says whether Out is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY says whether ErrOut is a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// New returns streams on in, out and errOut, terminals as the flags say.
func New(in io.Reader, out, errOut io.Writer, stdoutTTY, stderrTTY bool) *IOStreams {
	return &IOStreams{In: in, Out: out, ErrOut: errOut, stdoutTTY: stdoutTTY, stderrTTY: stderrTTY}
}

// System returns the process's own streams.
func System() *IOStreams {
	s := New(os.Stdin, os.Stdout, os.Stderr, isTerminal(os.Stdout), isTerminal(os.Stderr))
	if s.stdoutTTY {
		s.width = terminalWidth(os.Stdout)
	}
	return s
}

// isTerminal reports whether f is a character device.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// terminalWidth is f's terminal's columns, 0 when unknown.
func terminalWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
