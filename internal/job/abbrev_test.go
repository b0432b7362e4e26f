package job

import (
	"errors"
	"slices"
	"testing"
)

// TestExpandAbbrevPure: the expander on a hand-made flag list, without a
// command: a value is skipped after a flag that takes one (and after a
// shorthand at the end of its argument), a bare flag takes none, the one
// torchrun flag among several candidates wins, and an ambiguity is a
// *UsageError. runcmd's TestExpandAbbrev runs it over the real flags.
func TestExpandAbbrevPure(t *testing.T) {
	flags := []Flag{
		{Name: "nproc-per-node", Torchrun: true}, {Name: "no-python", Bare: true, Torchrun: true}, {Name: "no-prefix", Bare: true},
		{Name: "log-dir", Torchrun: true}, {Name: "wait", Bare: true}, {Name: "ngpus", Shorthand: "n"},
		{Name: "module", Shorthand: "m", Bare: true, Torchrun: true}, {Name: "mine"}, {Name: "mint"},
	}
	for _, tc := range []struct {
		args, want []string
		err        string
	}{
		{args: []string{"--nproc_per", "2", "t.py"}, want: []string{"--nproc-per-node", "2", "t.py"}},
		{args: []string{"--log-d", "--nproc", "t.py"}, want: []string{"--log-dir", "--nproc", "t.py"}},
		{args: []string{"--wai", "--nproc", "2", "t.py"}, want: []string{"--wait", "--nproc-per-node", "2", "t.py"}},
		{args: []string{"-mn", "--nproc", "t.py"}, want: []string{"-mn", "--nproc", "t.py"}},
		{args: []string{"-mn3", "--nproc", "2", "t.py"}, want: []string{"-mn3", "--nproc-per-node", "2", "t.py"}},
		{args: []string{"--no-p", "prog"}, want: []string{"--no-python", "prog"}},
		{args: []string{"--zzz", "t.py"}, want: []string{"--zzz", "t.py"}},
		{args: []string{"t.py", "--nproc"}, want: []string{"t.py", "--nproc"}},
		{args: []string{"--min", "1"}, err: "ambiguous option: --min could match --mine, --mint"},
	} {
		got, err := ExpandAbbrev(flags, tc.args)
		if tc.err != "" {
			var ue *UsageError
			if err == nil || err.Error() != tc.err || !errors.As(err, &ue) {
				t.Errorf("%q: %v, want usage error %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}
