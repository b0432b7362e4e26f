package launch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Std is a set of a rank's standard streams, numbered as torchrun's Std:
// 0 none, 1 stdout, 2 stderr, 3 both.
type Std int

const (
	StdNone Std = 0
	StdOut  Std = 1
	StdErr  Std = 2
	StdAll  Std = StdOut | StdErr
)

// StreamNames name each value of -r and -t.
var StreamNames = []string{StdNone: "none", StdOut: "stdout", StdErr: "stderr", StdAll: "both"}

// ErrStreams is wrapped by ParseStreams's errors.
var ErrStreams = errors.New("want 0-3 (" + StreamValues() + ") or LOCAL_RANK:0-3 pairs such as 0:3,1:0")

// StreamValues are StreamNames as "0 none, 1 stdout, 2 stderr, 3 both".
func StreamValues() string {
	parts := make([]string, len(StreamNames))
	for v, n := range StreamNames {
		parts[v] = fmt.Sprintf("%d %s", v, n)
	}
	return strings.Join(parts, ", ")
}

// Streams says which streams of each local rank torchrun's -r or -t value
// covers; the zero value covers nothing.
type Streams struct {
	All Std // every local rank's, when PerRank is nil
	// PerRank maps local ranks to their streams ("0:3,1:0"); those it does
	// not name get StdNone, as in torchrun.
	PerRank map[int]Std
}

// ParseStreams parses a torchrun -r/-t value: "0" to "3" for every local
// rank, or LOCAL_RANK:STD pairs. "" is StdNone; any other value gives an
// error wrapping ErrStreams.
func ParseStreams(s string) (Streams, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Streams{}, nil
	}
	if !strings.Contains(s, ":") {
		v, err := parseStd(s)
		if err != nil {
			return Streams{}, fmt.Errorf("%q: %w", s, ErrStreams)
		}
		return Streams{All: v}, nil
	}
	out := Streams{PerRank: map[int]Std{}}
	for _, pair := range strings.Split(s, ",") {
		r, v, ok := strings.Cut(pair, ":")
		lr, err := strconv.Atoi(r)
		std, err2 := parseStd(v)
		if !ok || err != nil || lr < 0 || err2 != nil {
			return Streams{}, fmt.Errorf("%q: %w", s, ErrStreams)
		}
		if _, dup := out.PerRank[lr]; dup {
			return Streams{}, fmt.Errorf("%q: local rank %d given twice", s, lr)
		}
		out.PerRank[lr] = std
	}
	return out, nil
}

func parseStd(s string) (Std, error) {
	if len(s) != 1 || s[0] < '0' || s[0] > '3' {
		return 0, ErrStreams
	}
	return Std(s[0] - '0'), nil
}

// For returns the streams of local rank lr.
func (s Streams) For(lr int) Std {
	if s.PerRank != nil {
		return s.PerRank[lr]
	}
	return s.All
}

// IsZero says whether s covers no stream of any rank.
func (s Streams) IsZero() bool {
	for _, v := range s.PerRank {
		if v != StdNone {
			return false
		}
	}
	return s.All == StdNone
}
