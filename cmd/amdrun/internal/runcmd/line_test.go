package runcmd

import (
	"reflect"
	"slices"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestEveryArgDeclared: each field of job.CommandLine is the value of
// exactly one flag of the command, so that job never reads a field no
// flag sets.
func TestEveryArgDeclared(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams()
	cmd := NewCmdRun(&cmdutil.Factory{IOStreams: ios}, nil)
	seen := map[*job.Arg]string{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if a, ok := f.Value.(*job.Arg); ok {
			if other, dup := seen[a]; dup {
				t.Errorf("--%s and --%s share one job.Arg", other, f.Name)
			}
			seen[a] = f.Name
			if a.Name() != f.Name {
				t.Errorf("--%s is declared on the Arg named %q", f.Name, a.Name())
			}
		}
	})
	if n := reflect.TypeOf(job.CommandLine{}).NumField(); len(seen) != n {
		t.Errorf("%d flags are declared on job.Args, job.CommandLine has %d fields", len(seen), n)
	}
}

// TestDummyFlagIsOneRow: a new torchrun flag is one decl call on one Arg
// (in the command, one field of job.CommandLine): it parses, says it was
// given, is read from its PET_* variable, which then names it in errors,
// and an abbreviation shared with one of amdrun's own flags means it.
func TestDummyFlagIsOneRow(t *testing.T) {
	newCmd := func() (*cobra.Command, *job.Arg) {
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
		cmd.SetGlobalNormalizationFunc(normalizeFlag)
		var a, own job.Arg
		d := decl{cmd: cmd, fl: cmd.Flags()}
		declare(d, &a, d.fl.StringVarP, nil, "dummy-flag", "", "d", "a dummy torchrun flag", job.TorchPET)
		declare(d, &own, d.fl.BoolVarP, nil, "dummy-own", "", false, "one of amdrun's own", job.Own)
		return cmd, &a
	}
	cmd, a := newCmd()
	if err := cmd.Flags().Parse([]string{"--dummy_flag", "v"}); err != nil || !a.Given() || a.String() != "v" || a.Label() != "--dummy-flag" {
		t.Errorf("--dummy_flag v: %v, given %v, %q, label %q", err, a.Given(), a.String(), a.Label())
	}
	cmd, a = newCmd()
	if err := applyPET(cmd.Flags(), []string{"PET_DUMMY_FLAG=w"}); err != nil || a.String() != "w" || a.Label() != "PET_DUMMY_FLAG" {
		t.Errorf("PET_DUMMY_FLAG=w: %v, %q, label %q", err, a.String(), a.Label())
	}
	cmd, a = newCmd()
	if a.Given() || a.String() != "d" {
		t.Errorf("not given: given %v, %q; want the default", a.Given(), a.String())
	}
	if got, err := ExpandAbbrev(cmd, []string{"--dummy", "v", "t.py"}); err != nil || !slices.Equal(got, []string{"--dummy-flag", "v", "t.py"}) {
		t.Errorf("--dummy: %q, %v; want torchrun's --dummy-flag", got, err)
	}
}
