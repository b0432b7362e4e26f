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
	"os/exec"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// ToolTimeout bounds one vendor tool run; a hung driver must not hang amdrun.
const ToolTimeout = 30 * time.Second

// ExecRunner is the real topology.Runner: it runs name from PATH with args,
// no shell, and returns its standard output. A missing tool gives an error
// wrapping topology.ErrToolNotFound; a non-zero exit a *topology.ToolError.
func ExecRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, topology.ErrToolNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, ToolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		te := &topology.ToolError{Tool: name, Args: args, ExitCode: -1, Stderr: stderr.String(), Err: err}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			te.ExitCode = ee.ExitCode()
		}
		if ctx.Err() != nil {
			te.Stderr = fmt.Sprintf("timed out after %s", ToolTimeout)
		}
		return nil, te
	}
	return stdout.Bytes(), nil
}
