package job

import (
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/launch"
)

// TestParseStall: --stall-timeout's words and durations, --on-stall's
// words, and one line for anything else.
func TestParseStall(t *testing.T) {
	tests := []struct {
		timeout, on string
		want        time.Duration
		action      launch.StallAction
		err         string
	}{
		{"auto", "report", launch.StallAuto, launch.StallReport, ""},
		{"off", "stop", 0, launch.StallStop, ""},
		{"0", "restart", 0, launch.StallRestart, ""},
		{"3s", "report", 3 * time.Second, launch.StallReport, ""},
		{"-1s", "report", 0, "", "--stall-timeout must be positive, off or auto, got -1s"},
		{"30", "report", 0, "", "--stall-timeout 30: add a unit, e.g. 30s or 30m"},
		{"3s", "kill", 0, "", "on-stall"},
	}
	for _, tc := range tests {
		v := map[string]string{"stall-timeout": tc.timeout, "on-stall": tc.on}
		l := &CommandLine{Value: func(f string) string { return v[f] }, Changed: func(string) bool { return true }}
		var o Options
		err := o.parseStall(l)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %s: %v", tc.timeout, tc.on, err)
		case tc.err == "on-stall":
			if we, ok := err.(*WordError); !ok || we.Flag != "on-stall" {
				t.Errorf("--on-stall %s: %v, want a WordError", tc.on, err)
			}
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("--stall-timeout %s: %v, want %q", tc.timeout, err, tc.err)
		case tc.err == "" && (o.StallTimeout != tc.want || o.OnStall != tc.action):
			t.Errorf("%s %s: %v %v, want %v %v", tc.timeout, tc.on, o.StallTimeout, o.OnStall, tc.want, tc.action)
		}
	}
}
