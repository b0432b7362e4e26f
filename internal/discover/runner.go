// Package discover finds the node's topology: it picks a source (KFD
// sysfs, amd-smi, rocm-smi, nvidia-smi, a saved file, the bundled
// example), runs vendor tools, and attaches the host's NUMA facts.
//
// It exists apart from internal/topology so that topology and its parsers
// never start a process: this package owns os/exec.
package discover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// ToolTimeout bounds one vendor tool run; a hung driver must not hang
// amdrun. AMDRUN_TOOL_TIMEOUT (a duration, e.g. 90s) overrides it.
const ToolTimeout = 30 * time.Second

// toolTimeout is ToolTimeout or the AMDRUN_TOOL_TIMEOUT override.
func toolTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("AMDRUN_TOOL_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return ToolTimeout
}

// ExecRunner is the real topology.Runner: it runs name from PATH with args,
// no shell, and returns its standard output. A missing tool gives an error
// wrapping topology.ErrToolNotFound; a non-zero exit a *topology.ToolError;
// a tool still running after the timeout is killed with everything it
// started (its own process group) and gives a *topology.ToolError wrapping
// context.DeadlineExceeded.
func ExecRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, topology.ErrToolNotFound)
	}
	timeout := toolTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A tool is often a script whose children keep the output pipes open:
	// kill the whole group, and stop waiting for the pipes soon after.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if err != nil {
		te := &topology.ToolError{Tool: name, Args: args, ExitCode: -1, Stderr: stderr.String(), Err: err}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			te.ExitCode = ee.ExitCode()
		}
		if ctx.Err() != nil {
			te.Stderr = fmt.Sprintf("timed out after %s (set AMDRUN_TOOL_TIMEOUT to wait longer)", timeout)
			te.Err = ctx.Err()
		}
		return nil, te
	}
	return stdout.Bytes(), nil
}
