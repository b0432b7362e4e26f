//go:build !linux

package launch

import (
	"context"
	"fmt"
	"os"

	"github.com/amdrun/amdrun/internal/plan"
)

// Supported says whether Run can start workers on this system: only on
// Linux (process groups, parent-death signals, affinity, flock leases).
// Plans can be made anywhere.
const Supported = false

// OwnCPUs is unknown off Linux: nil means every CPU of the host's NUMA
// nodes (a plan made here describes another machine anyway).
func OwnCPUs() []int { return nil }

// Run is only supported on Linux; elsewhere it returns ErrNotSupported.
func Run(ctx context.Context, p *plan.Plan, o RunOptions) (exitCode int, err error) {
	return 1, ErrNotSupported
}

// ShimMain is only supported on Linux; elsewhere it reports
// ErrNotSupported and returns 1.
func ShimMain(args []string) int {
	fmt.Fprintln(os.Stderr, ErrNotSupported)
	return 1
}

// KeeperMain is only supported on Linux; elsewhere it reports
// ErrNotSupported and returns 1.
func KeeperMain(args []string) int {
	fmt.Fprintln(os.Stderr, ErrNotSupported)
	return 1
}

// ProbeContainment is only supported on Linux; elsewhere it returns
// ErrNotSupported.
func ProbeContainment(self string) (Containment, error) {
	return ContainAuto, ErrNotSupported
}

// Job is a running amdrun launch (Linux only).
type Job struct{ PID, UID int }

// FindJob is only supported on Linux.
func FindJob(pid int) (Job, error) { return Job{}, ErrNotSupported }

// AskStacks is only supported on Linux.
func AskStacks(j Job, native bool) (string, error) { return "", ErrNotSupported }

// Elsewhere the modes are names only, for --contain to parse: a dry run
// plans anywhere.
func init() {
	for _, c := range []Containment{ContainPIDNamespace, ContainUserNamespace, ContainSubreaper} {
		register(containMode{name: c})
	}
}
