package printable

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"amdrun -n 2 train.py", 0, "amdrun -n 2 train.py"},
		{"\x1b[2J\x07\r\t\x7f", 0, `\x1b[2J\x07\x0d\x09\x7f`},
		{"\u009b31m", 0, `\u009b31m`},                 // C1 CSI
		{"evil\u202egnp.exe", 0, `evil\u202egnp.exe`}, // right-to-left override
		{"a\xffb", 0, `a\xffb`},                       // not UTF-8
		{"héllo wörld", 0, "héllo wörld"},
		{"abcdefghij", 8, "abcde..."},
		{"abcdefgh", 8, "abcdefgh"},
		{"ab\x1bcdefgh", 8, `ab...`}, // an escape is never cut in half
		{strings.Repeat("x", 10000), 200, strings.Repeat("x", 197) + "..."},
	} {
		got := String(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("String(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if tt.max > 0 && len([]rune(got)) > tt.max {
			t.Errorf("String(%q, %d) = %q is longer than %d", tt.in, tt.max, got, tt.max)
		}
	}
}
