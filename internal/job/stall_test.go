package job

import (
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/launch"
)

// TestParseStall: --stall-timeout's words and durations, and one line
// for anything else (--on-stall's words are the command's enum, read as
// the line is parsed: runcmd's TestEnumWordErrorsFromTheCommand).
func TestParseStall(t *testing.T) {
	tests := []struct {
		timeout string
		want    time.Duration
		err     string
	}{
		{"auto", launch.StallAuto, ""},
		{"off", 0, ""},
		{"0", 0, ""},
		{"3s", 3 * time.Second, ""},
		{"-1s", 0, "--stall-timeout must be positive, off or auto, got -1s"},
		{"30", 0, "--stall-timeout 30: add a unit, e.g. 30s or 30m"},
	}
	for _, tc := range tests {
		l := &CommandLine{}
		give(&l.StallTimeout, "stall-timeout", tc.timeout)
		var o Options
		err := o.parseStall(l)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.timeout, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("--stall-timeout %s: %v, want %q", tc.timeout, err, tc.err)
		case tc.err == "" && o.StallTimeout != tc.want:
			t.Errorf("%s: %v, want %v", tc.timeout, o.StallTimeout, tc.want)
		}
	}
}
