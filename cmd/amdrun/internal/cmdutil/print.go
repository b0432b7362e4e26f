package cmdutil

import (
	"fmt"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
)

// Warnf prints "amdrun: warning: MESSAGE" on stderr, one line, unless
// io.Quiet (-q): every warning goes through here.
func Warnf(io *iostreams.IOStreams, format string, args ...any) {
	if io.Quiet {
		return
	}
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	fmt.Fprintf(io.ErrOut, "amdrun: warning: %s\n", msg)
}
