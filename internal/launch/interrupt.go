package launch

import "strings"

// interruptLine is the one line a failure summary shows for a rank of an
// interrupted job whose stderr ends with Python's KeyboardInterrupt
// traceback: its last line, instead of ten lines of frames per rank
// (issue 23); ok is false when the lines end otherwise.
func interruptLine(lines []string) (line string, ok bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		if l == "KeyboardInterrupt" || strings.HasPrefix(l, "KeyboardInterrupt:") {
			return l, true
		}
		return "", false
	}
	return "", false
}
