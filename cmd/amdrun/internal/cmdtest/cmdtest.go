// Package cmdtest is test support for the command packages: streams
// backed by buffers, with the terminal setting a test asks for. Only
// tests import it (make deadcode leaves it out of its list of functions
// only tests reach, as it does internal/testutil: test support is the one
// exception, docs/development.md).
package cmdtest

import (
	"bytes"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
)

// Streams returns streams backed by buffers, none a terminal: the
// streams and their in, out and errOut.
func Streams() (*iostreams.IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return iostreams.New(in, out, errOut, false, false), in, out, errOut
}

// SetStdoutTTY makes s's Out count as a terminal (v) or not, as
// iostreams.System would detect it.
func SetStdoutTTY(s *iostreams.IOStreams, v bool) {
	*s = *iostreams.New(s.In, s.Out, s.ErrOut, v, s.IsStderrTTY())
}

// SetStderrTTY makes s's ErrOut count as a terminal (v) or not.
func SetStderrTTY(s *iostreams.IOStreams, v bool) {
	*s = *iostreams.New(s.In, s.Out, s.ErrOut, s.IsStdoutTTY(), v)
}
