package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/amdrun/amdrun/internal/printable"
)

// EnvErrorFile tells a rank where torch's @record writes its uncaught
// exception as JSON; Run sets it per rank and attempt, as torchrun does.
const EnvErrorFile = "TORCHELASTIC_ERROR_FILE"

const maxErrorFile = 1 << 20

// errorFrames is how many innermost frames a failure summary shows.
const errorFrames = 3

// ErrErrorFile is wrapped by ParseErrorFile's errors.
var ErrErrorFile = errors.New("not a torch error file")

// RankError is the exception a rank recorded in its error file.
type RankError struct {
	// Message is "Type: message", as torch writes it (several lines maybe).
	Message string
	// Frames are the innermost frames of the traceback (at most
	// errorFrames, not @record's), outermost first, each its lines without
	// their indentation; nil when the file has none.
	Frames [][]string
	// Timestamp is when it was recorded, in Unix seconds; 0: unknown.
	Timestamp int64
}

// ParseErrorFile reads either format torch writes (1.13 to now):
// {"message": {"message": M, "extraInfo": {"py_callstack": TRACEBACK,
// "timestamp": "T"}, "errorCode": N}}, or {"message": M, "timestamp": T}.
// Anything else is an error wrapping ErrErrorFile.
func ParseErrorFile(b []byte) (*RankError, error) {
	var top struct {
		Message   json.RawMessage `json:"message"`
		Timestamp json.RawMessage `json:"timestamp"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrErrorFile, err)
	}
	var re RankError
	if json.Unmarshal(top.Message, &re.Message) == nil {
		re.Timestamp = timestamp(top.Timestamp)
	} else {
		var inner struct {
			Message   *string `json:"message"`
			ExtraInfo struct {
				PyCallstack string          `json:"py_callstack"`
				Timestamp   json.RawMessage `json:"timestamp"`
			} `json:"extraInfo"`
		}
		if err := json.Unmarshal(top.Message, &inner); err != nil || inner.Message == nil {
			return nil, fmt.Errorf("%w: no message", ErrErrorFile)
		}
		re.Message = *inner.Message
		re.Frames = lastFrames(inner.ExtraInfo.PyCallstack)
		re.Timestamp = timestamp(inner.ExtraInfo.Timestamp)
	}
	if strings.TrimSpace(re.Message) == "" {
		return nil, fmt.Errorf("%w: empty message", ErrErrorFile)
	}
	return &re, nil
}

// timestamp reads torch's timestamp, a number or a string of one (else 0).
func timestamp(raw json.RawMessage) int64 {
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		fmt.Sscanf(s, "%d", &n)
	}
	return n
}

// recordWrapper is in the file name of @record's own frame.
const recordWrapper = "torch/distributed/elastic/multiprocessing/errors/"

// lastFrames returns the innermost errorFrames frames of tb's last
// traceback, outermost first, without Python 3.11's ^ and ~ marker lines.
func lastFrames(tb string) [][]string {
	var frames [][]string
	for _, line := range strings.Split(tb, "\n") {
		switch {
		case strings.HasPrefix(line, "Traceback (most recent call last):"):
			frames = nil // a later traceback replaces an earlier one
		case strings.HasPrefix(line, "  File "), strings.HasPrefix(line, "  [Previous line repeated"):
			frames = append(frames, []string{strings.TrimSpace(line)})
		case strings.HasPrefix(line, "    ") && len(frames) > 0:
			if t := strings.TrimSpace(line); strings.Trim(t, "^~ ") != "" {
				frames[len(frames)-1] = append(frames[len(frames)-1], t)
			}
		}
	}
	kept := slices.DeleteFunc(frames, func(f []string) bool { return strings.Contains(f[0], recordWrapper) })
	if kept = kept[max(len(kept)-errorFrames, 0):]; len(kept) == 0 {
		return nil
	}
	return kept
}

// maxErrorLines and maxErrorWidth bound what a summary prints of a message.
const (
	maxErrorLines = 10
	maxErrorWidth = 300
)

// Lines is the exception as a failure summary shows it: at most
// maxErrorLines of message, then the frames, each printable.String.
func (e *RankError) Lines() []string {
	msg := strings.Split(strings.TrimRight(e.Message, "\n"), "\n")
	if len(msg) > maxErrorLines {
		msg = append(msg[:maxErrorLines], fmt.Sprintf("... (%d more lines)", len(msg)-maxErrorLines))
	}
	var out []string
	for _, l := range msg {
		out = append(out, printable.String(l, maxErrorWidth))
	}
	if len(e.Frames) > 0 {
		out = append(out, fmt.Sprintf("traceback, innermost %d frame(s):", len(e.Frames)))
		for _, f := range e.Frames {
			for i, l := range f {
				indent := "  "
				if i > 0 {
					indent = "    "
				}
				out = append(out, indent+printable.String(l, maxErrorWidth))
			}
		}
	}
	return out
}

// interruptLine is the last line of a KeyboardInterrupt traceback that
// ends lines, for the summary (issue 23); ok is false when they end otherwise.
func interruptLine(lines []string) (line string, ok bool) {
	for _, l := range slices.Backward(lines) {
		switch l = strings.TrimSpace(l); {
		case l == "KeyboardInterrupt" || strings.HasPrefix(l, "KeyboardInterrupt:"):
			return l, true
		case l != "":
			return "", false
		}
	}
	return "", false
}
