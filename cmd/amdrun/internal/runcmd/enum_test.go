package runcmd

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
)

// TestEnumFlagsDeclaredOnce: every word an enum flag declares is one its
// package parses, the help lists exactly those words, completion offers
// exactly them, and any other word gets the enum's one error line.
func TestEnumFlagsDeclaredOnce(t *testing.T) {
	parsers := map[*cmdutil.Enum]func(string) error{
		policyFlag:        func(s string) error { _, err := selector.PolicyByName(s); return err },
		orderFlag:         func(s string) error { _, err := selector.ParseOrder(s); return err },
		bindFlag:          func(s string) error { _, err := plan.ParseBindMode(s); return err },
		memFlag:           func(s string) error { _, err := plan.ParseMemPolicy(s); return err },
		containFlag:       func(s string) error { _, err := launch.ParseContainment(s); return err },
		numaBalancingFlag: func(s string) error { _, err := numabalance.ParseMode(s); return err },
		onStallFlag:       func(s string) error { _, err := launch.ParseStallAction(s); return err },
		launcherFlag: func(s string) error {
			if s != "amdrun" && s != "torchrun" {
				return errors.New("not a launcher")
			}
			return nil
		},
		// torchrun's word flags are parsed by job's Resolve: through the
		// command.
		nprocFlag:       resolves(t, "nproc-per-node"),
		startMethodFlag: resolves(t, "start-method"),
		numaBindingFlag: resolves(t, "numa-binding"),
	}
	ios, _, _, _ := cmdtest.Streams()
	cmd := NewCmdRun(&cmdutil.Factory{IOStreams: ios}, nil)
	for e, parse := range parsers {
		for _, v := range e.Values() {
			if err := parse(v); err != nil {
				t.Errorf("--%s %s is declared but its package refuses it: %v", e.Name, v, err)
			}
		}
		f := cmd.Flags().Lookup(e.Name)
		if f == nil {
			t.Fatalf("--%s is declared as an enum but not a flag", e.Name)
		}
		for _, v := range e.Values() {
			if !strings.Contains(f.Usage, v) {
				t.Errorf("--%s help %q lacks %q", e.Name, f.Usage, v)
			}
		}
		complete, ok := cmd.GetFlagCompletionFunc(e.Name)
		if !ok {
			t.Errorf("--%s has no completion", e.Name)
			continue
		}
		if got, _ := complete(cmd, nil, ""); !reflect.DeepEqual(got, e.Values()) {
			t.Errorf("--%s completes %q, want %q", e.Name, got, e.Values())
		}
		if parse("bogus") == nil {
			t.Fatalf("--%s: its package takes bogus", e.Name)
		}
		err := e.Err("bogus")
		var fe *cmdutil.FlagError
		words := e.Values()
		if e.Also != "" {
			words = append([]string{e.Also}, words...)
		}
		want := "--" + e.Name + ": want " + cmdutil.JoinOr(words) + `, got "bogus"`
		if !errors.As(err, &fe) || err.Error() != want {
			t.Errorf("--%s bogus: %v, want the usage error %q", e.Name, err, want)
		}
	}
	for _, e := range completionOnly {
		if _, ok := cmd.GetFlagCompletionFunc(e.Name); !ok {
			t.Errorf("--%s has no completion", e.Name)
		}
	}
	if got := cmd.Flags().Lookup("contain").Usage; got != "how nothing the job starts outlives it: auto, pid-namespace (needs root), user-namespace (where the kernel permits user namespaces) or subreaper (see amdrun doctor)" {
		t.Errorf("--contain help %q", got)
	}
}

// TestEnumWordErrorsFromTheCommand: every enum flag given a word it does
// not take fails, as the command parses it, with exactly its
// declaration's error (cmdutil.EnumVar).
func TestEnumWordErrorsFromTheCommand(t *testing.T) {
	for _, e := range enums {
		ios, _, _, _ := cmdtest.Streams()
		f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return nil },
			Warn: func(string, ...any) {}}
		cmd := NewCmdRun(f, func(context.Context, *Options) error {
			t.Errorf("--%s bogus ran", e.Name)
			return nil
		})
		cmd.SetArgs([]string{"--" + e.Name, "bogus", "t.py"})
		err := cmd.Execute()
		var fe *cmdutil.FlagError
		if want := e.Err("bogus"); !errors.As(err, &fe) || err.Error() != want.Error() {
			t.Errorf("--%s bogus: %v, want %q", e.Name, err, want)
		}
	}
	if len(enums) != 11 {
		t.Errorf("%d enum flags, want the 11 declared", len(enums))
	}
}

// enums are the launch command's enum flags.
var enums = []*cmdutil.Enum{policyFlag, orderFlag, bindFlag, memFlag, containFlag, numaBalancingFlag, launcherFlag, onStallFlag,
	nprocFlag, startMethodFlag, numaBindingFlag}

// resolves parses a word of flag as the command does (job's Resolve,
// through a dry run's command line), for the flags job reads itself.
func resolves(t *testing.T, flag string) func(string) error {
	return func(word string) error {
		ios, _, _, _ := cmdtest.Streams()
		f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return nil }, Warn: func(string, ...any) {}}
		cmd := NewCmdRun(f, func(context.Context, *Options) error { return nil })
		cmd.SetArgs([]string{"--" + flag, word, "--dry-run", "t.py"})
		return cmd.Execute()
	}
}

// TestEnumWordErrorFromPET: a word flag set from its PET_* variable is
// refused naming the variable, with the declaration's words.
func TestEnumWordErrorFromPET(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams()
	f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return []string{"PET_START_METHOD=bogus"} }, Warn: func(string, ...any) {}}
	cmd := NewCmdRun(f, func(context.Context, *Options) error { t.Error("ran"); return nil })
	cmd.SetArgs([]string{"t.py"})
	if err, want := cmd.Execute(), `PET_START_METHOD: want spawn, fork or forkserver, got "bogus"`; err == nil || err.Error() != want {
		t.Errorf("PET_START_METHOD=bogus: %v, want %q", err, want)
	}
}
