package launch

import "strings"

// interruptLine is the last line of a KeyboardInterrupt traceback that
// ends lines, for the summary (issue 23); ok is false when they end otherwise.
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
