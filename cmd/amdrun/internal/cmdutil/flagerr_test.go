package cmdutil

import (
	"errors"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// A flag value pflag cannot parse reads as amdrun's own value errors,
// named as the user gave it (issue 31: `--ngpus abc` printed
// strconv.ParseInt's words); an unknown flag names the nearest.
func TestFlagValueErrors(t *testing.T) {
	c := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }, SilenceErrors: true, SilenceUsage: true}
	fs := c.Flags()
	fs.Int("count", 0, "")
	fs.Duration("budget", time.Second, "")
	fs.Bool("dry-run", false, "")
	fs.StringSlice("list", nil, "")
	for _, tt := range []struct{ flag, value, label, want string }{
		{"count", "abc", "", `--count: want a whole number, got "abc"`},
		{"count", "99999999999999999999", "", `--count: want a whole number, got "99999999999999999999"`},
		{"budget", "5", "", `--budget: want a duration such as 30s or 10m, got "5"`},
		{"dry-run", "maybe", "PET_DRY_RUN", `PET_DRY_RUN: want true or false, got "maybe"`},
		{"list", `"a`, "", `--list: parse error on line 1, column 3: extraneous or missing " in quoted-field`},
	} {
		err := ValueError(tt.label, fs.Set(tt.flag, tt.value))
		var fe *FlagError
		if !errors.As(err, &fe) || err.Error() != tt.want {
			t.Errorf("--%s %q: %v, want the FlagError %q", tt.flag, tt.value, err, tt.want)
		}
	}
	if err := errors.New("other"); ValueError("", err) != err {
		t.Errorf("ValueError changed an error that is not pflag's value error")
	}
	c.SetFlagErrorFunc(FlagParseError)
	for args, want := range map[string]string{
		"--cont":     "unknown flag: --cont; did you mean --count?",
		"--dry-rnu":  "unknown flag: --dry-rnu; did you mean --dry-run?",
		"--frobnify": "unknown flag: --frobnify",
	} {
		c.SetArgs([]string{args})
		if err := c.Execute(); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
