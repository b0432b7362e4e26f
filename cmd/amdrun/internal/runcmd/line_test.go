package runcmd

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/job"
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
	if n := len(reflect.VisibleFields(reflect.TypeOf(job.CommandLine{}))) - 1; len(seen) != n { // all but args
		t.Errorf("%d flags are declared on job.Args, job.CommandLine has %d fields", len(seen), n)
	}
}

// TestDummyFlagIsOneRow: a new torchrun flag is one row of flagTable on
// one Arg: it becomes a flag in either spelling, is read from its PET_*
// variable (which then names it in errors), an abbreviation means it,
// --launcher torchrun passes it on as its row says (not a row without
// job.Pass; not a job.NotToAgent row under torch's agent; a switch
// bare), a job.AgentOnly row given a value other than its default says
// why it does nothing when amdrun starts the ranks (not a job.Quiet one),
// and the docs' tables list them.
func TestDummyFlagIsOneRow(t *testing.T) {
	var passed, kept, notAgent, agentOnly, quiet job.Arg
	n := len(flagTable)
	flagTable = append(flagTable, func(d decl, _ *Options) {
		declare(d, &passed, d.fl.StringVarP, nil, "dummy-flag", "", "d", "a dummy torchrun flag", job.TorchPET|job.Pass)
		declare(d, &kept, d.fl.BoolVarP, nil, "dummy-kept", "", false, "a dummy torchrun switch amdrun keeps", job.TorchPET)
		declare(d, &notAgent, d.fl.BoolVarP, nil, "dummy-switch", "", false, "a dummy torchrun switch", job.TorchName|job.Pass|job.NotToAgent)
		declare(d, &agentOnly, d.fl.StringVarP, nil, "dummy-agent", "", "none", "the agent's dummy", job.TorchPET|job.Pass|job.AgentOnly)
		declare(d, &quiet, d.fl.StringVarP, nil, "dummy-quiet", "", "", "the agent's quiet dummy", job.TorchPET|job.Pass|job.AgentOnly|job.Quiet)
	})
	var warned []string
	defer func() { flagTable = flagTable[:n] }()
	run := func(env []string, args ...string) (*Options, error) {
		t.Helper()
		passed, kept, notAgent, agentOnly, quiet, warned = job.Arg{}, job.Arg{}, job.Arg{}, job.Arg{}, job.Arg{}, nil
		ios, _, _, _ := cmdtest.Streams()
		f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return env }, Warn: func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }}
		var got *Options
		cmd := NewCmdRun(f, func(_ context.Context, o *Options) error { got = o; return nil })
		args, err := ExpandAbbrev(cmd, append(args, "t.py"))
		if err != nil {
			return nil, err
		}
		cmd.SetArgs(args)
		return got, cmd.ExecuteContext(context.Background())
	}
	for _, tc := range []struct {
		env, args []string
		want      []string
	}{
		{args: []string{"--launcher", "torchrun", "-n", "2", "--dummy_flag", "v", "--dummy-switch", "--dummy-kept"}, want: []string{"--dummy_flag", "v", "--dummy_switch"}},
		{args: []string{"--launcher", "torchrun", "-n", "2", "--dummy-fl", "v"}, want: []string{"--dummy_flag", "v"}},
		{env: []string{"PET_DUMMY_FLAG=w", "PET_DUMMY_KEPT=1"}, args: []string{"--launcher", "torchrun", "-n", "2"}, want: []string{"--dummy_flag", "w"}},
		{args: []string{"-n", "2", "--dummy-flag", "v", "--dummy-switch"}, want: nil},
		{args: []string{"--nnodes", "2:4", "--dummy-flag", "v", "--dummy-switch"}, want: []string{"--dummy_flag", "v"}},
		{args: []string{"--launcher", "torchrun", "-n", "2", "--dummy-agent", "x"}, want: []string{"--dummy_agent", "x"}},
	} {
		o, err := run(tc.env, tc.args...)
		if err != nil || !slices.Equal(o.TorchrunArgs, tc.want) {
			t.Errorf("%q %q: torchrun gets %q, %v; want %q", tc.env, tc.args, o.TorchrunArgs, err, tc.want)
		}
	}
	if _, err := run([]string{"PET_DUMMY_KEPT=1"}); err != nil || !kept.On() || kept.Label() != "PET_DUMMY_KEPT" {
		t.Errorf("PET_DUMMY_KEPT=1: %v, on %v, label %q", err, kept.On(), kept.Label())
	}
	if _, err := run(nil); err != nil || passed.Given() || passed.String() != "d" {
		t.Errorf("not given: %v, given %v, %q; want the default", err, passed.Given(), passed.String())
	}
	for _, tc := range []struct {
		env  []string
		want []string
	}{
		{env: []string{"PET_DUMMY_AGENT=x"}, want: []string{"PET_DUMMY_AGENT does nothing under amdrun: the agent's dummy"}},
		{env: []string{"PET_DUMMY_AGENT=none", "PET_DUMMY_QUIET=x"}},
	} {
		if _, err := run(tc.env, "-n", "2"); err != nil || !slices.Equal(warned, tc.want) {
			t.Errorf("%q: %v, warned %q; want %q", tc.env, err, warned, tc.want)
		}
	}
	ios, _, _, _ := cmdtest.Streams()
	cmd := NewCmdRun(&cmdutil.Factory{IOStreams: ios}, nil)
	for doc, row := range map[string]string{
		flagDoc(cmd):      "| `--dummy-flag string` | `--dummy_flag`, `PET_DUMMY_FLAG` | passed on | `d` | a dummy torchrun flag |",
		agentOnlyDoc(cmd): "| `--dummy-agent` | the agent's dummy | yes |\n| `--dummy-quiet` | the agent's quiet dummy | no |",
	} {
		if !strings.Contains(doc, row) {
			t.Errorf("the docs' table lacks %s:\n%s", row, doc)
		}
	}
}
