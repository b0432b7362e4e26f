package stackscmd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/stackscmd"
	"github.com/amdrun/amdrun/internal/launch"
)

func TestNewCmdStacksArgs(t *testing.T) {
	tests := []struct {
		args    []string
		pid     int
		native  bool
		wantErr string
	}{
		{nil, 0, false, ""},
		{[]string{"4242"}, 4242, false, ""},
		{[]string{"--native", "4242"}, 4242, true, ""},
		{[]string{"job"}, 0, false, `JOB must be the pid of the job's amdrun, got "job"`},
		{[]string{"-3"}, 0, false, "unknown shorthand flag: '3' in -3"},
		{[]string{"1", "2"}, 0, false, "accepts at most 1 arg(s), received 2"},
	}
	for _, tt := range tests {
		ios, _, _, _ := cmdtest.Streams()
		var got *stackscmd.Options
		cmd := stackscmd.NewCmdStacks(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *stackscmd.Options) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		switch {
		case tt.wantErr != "":
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%q: %v, want %q", tt.args, err, tt.wantErr)
			}
		case err != nil || got == nil || got.PID != tt.pid || got.Native != tt.native:
			t.Errorf("%q: %v, options %+v", tt.args, err, got)
		}
	}
}

func TestRun(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams()
	job := launch.Job{PID: 7, UID: 0}
	opts := &stackscmd.Options{IO: ios, PID: 7,
		Find: func(pid int) (launch.Job, error) { return job, nil },
		Ask: func(j launch.Job, native bool) (string, error) {
			return fmt.Sprintf("stacks of %d %v\n", j.PID, native), nil
		}}
	if err := stackscmd.Run(context.Background(), opts); err != nil || out.String() != "stacks of 7 false\n" {
		t.Errorf("Run: %v, printed %q", err, out.String())
	}
	opts.Find = func(int) (launch.Job, error) {
		return launch.Job{}, fmt.Errorf("job 7 belongs to user bob: %w", launch.ErrNotOwner)
	}
	err := stackscmd.Run(context.Background(), opts)
	if !errors.Is(err, launch.ErrNotOwner) || err.Error() != "stacks: job 7 belongs to user bob: only the job's owner or root can take its stacks" {
		t.Errorf("another user's job: %v", err)
	}
}
