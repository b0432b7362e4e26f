// Package discover finds the node's topology: it picks a source, runs
// vendor tools (so that topology's parsers never start one) and attaches
// the host's NUMA facts.
package discover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// ToolTimeout bounds one vendor tool run, so that a hung driver does not
// hang amdrun; AMDRUN_TOOL_TIMEOUT overrides it (TimeoutFromEnv).
const ToolTimeout = 30 * time.Second

// MaxToolOutput bounds what amdrun reads of a tool's output or a saved
// topology, far above any real one.
const MaxToolOutput = 64 << 20

// ErrTooLarge is wrapped when a tool's output or a file is over
// MaxToolOutput.
var ErrTooLarge = errors.New("larger than 64 MiB")

// TimeoutFromEnv returns the tool timeout an AMDRUN_TOOL_TIMEOUT value
// asks for, or ToolTimeout when it is empty or not a positive duration.
func TimeoutFromEnv(v string) time.Duration {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	return ToolTimeout
}

// RunTool runs name from PATH with args, no shell, and returns its
// standard output (at most MaxToolOutput bytes). A missing tool gives an
// error wrapping topology.ErrToolNotFound; a non-zero exit, or a tool
// still running after timeout (0: none), killed with its process group,
// a *topology.ToolError with its stderr word for word.
func RunTool(ctx context.Context, timeout time.Duration, name string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, topology.ErrToolNotFound)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(ctx, path, args...)
	// Past the limit the tool is killed, not left blocked on a full pipe.
	stdout := &limitedBuffer{max: MaxToolOutput, onOver: stop}
	// Stderr past its limit is dropped, not refused: a refused write
	// would fail a tool that succeeded after many warnings.
	stderr := &limitedBuffer{max: maxToolStderr, truncate: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A tool is often a script whose children keep the output pipes open:
	// kill the whole group, and stop waiting for the pipes soon after.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if stdout.over {
		return nil, fmt.Errorf("%s: output %w", name, ErrTooLarge)
	}
	if err != nil {
		te := &topology.ToolError{Tool: name, Args: args, ExitCode: -1, Stderr: stderr.buf.String(), Err: err}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			te.ExitCode = ee.ExitCode()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			te.Err = fmt.Errorf("timed out after %s (set AMDRUN_TOOL_TIMEOUT to wait longer): %w", timeout, ctx.Err())
		}
		return nil, te
	}
	return stdout.buf.Bytes(), nil
}

// maxToolStderr bounds how much of a tool's standard error is kept.
const maxToolStderr = 1 << 20

// limitedBuffer keeps at most max bytes; a write past it fails, or, with
// truncate, keeps what fits. The buffer is not embedded: its ReadFrom
// would let io.Copy bypass the limit.
type limitedBuffer struct {
	buf      bytes.Buffer
	max      int
	truncate bool
	over     bool
	onOver   func() // called once, at the first write past max
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		if !b.over && b.onOver != nil {
			b.onOver()
		}
		b.over = true
		if b.truncate {
			b.buf.Write(p[:max(room, 0)])
			return len(p), nil
		}
		return 0, ErrTooLarge
	}
	return b.buf.Write(p)
}
