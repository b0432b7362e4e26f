package launch

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestErrStreamsNamesStreams keeps ErrStreams's list in step with StreamNames.
func TestErrStreamsNamesStreams(t *testing.T) {
	for v, n := range StreamNames {
		if want := fmt.Sprintf("%d %s", v, n); !strings.Contains(ErrStreams.Error(), want) {
			t.Errorf("ErrStreams %q does not say %q", ErrStreams, want)
		}
	}
}

func TestParseStreams(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Streams
	}{
		{"", Streams{}},
		{"0", Streams{}},
		{"3", Streams{All: StdAll}},
		{"1", Streams{All: StdOut}},
		{"0:3,1:0", Streams{PerRank: map[int]Std{0: StdAll, 1: StdNone}}},
		{"12:2,3:1", Streams{PerRank: map[int]Std{12: StdErr, 3: StdOut}}},
	} {
		got, err := ParseStreams(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseStreams(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	s, _ := ParseStreams("0:3,2:1")
	if s.For(0) != StdAll || s.For(1) != StdNone || s.For(2) != StdOut || s.IsZero() {
		t.Errorf("For: %v %v %v, IsZero %v", s.For(0), s.For(1), s.For(2), s.IsZero())
	}
	if z, _ := ParseStreams("0:0,1:0"); !z.IsZero() {
		t.Errorf("0:0,1:0 covers nothing, IsZero false")
	}
	for _, bad := range []string{"4", "x", "-1", "0:4", "0:", ":1", "a:1", "0:1,", "0:1,0:2", "01", "0:1;1:2", "0: 1"} {
		if _, err := ParseStreams(bad); err == nil {
			t.Errorf("ParseStreams(%q) accepted", bad)
		} else if bad != "0:1,0:2" && !errors.Is(err, ErrStreams) {
			t.Errorf("ParseStreams(%q) error %v does not wrap ErrStreams", bad, err)
		}
	}
}
