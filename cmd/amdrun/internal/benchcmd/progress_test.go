package benchcmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
)

// TestProgressTerminalAndPipe drives both branches of the measuring
// progress: on a terminal one line redrawn with \r (a bar), on a pipe a
// line at each quarter and nothing between.
func TestProgressTerminalAndPipe(t *testing.T) {
	for _, tty := range []bool{true, false} {
		errOut := &bytes.Buffer{}
		ios := iostreams.New(nil, nil, errOut, false, tty)
		p := progress(&Options{IO: ios})
		for done := 0; done <= 8; done++ {
			p(done, 8, time.Duration(done)*time.Second)
		}
		got := errOut.String()
		if tty {
			want := "\r[" + strings.Repeat("#", 30) + "] 8/8 figures, 8.0s"
			if strings.Count(got, "\r") != 9 || strings.Contains(got, "\n") || !strings.HasSuffix(got, want) {
				t.Errorf("on a terminal: %q, want 9 redraws with \\r, no newline, ending %q", got, want)
			}
			continue
		}
		want := "amdrun bench: 0/8 figures, 0.0s\namdrun bench: 2/8 figures, 2.0s\namdrun bench: 4/8 figures, 4.0s\n" +
			"amdrun bench: 6/8 figures, 6.0s\namdrun bench: 8/8 figures, 8.0s\n"
		if got != want {
			t.Errorf("on a pipe:\n%q\nwant\n%q", got, want)
		}
	}
}
