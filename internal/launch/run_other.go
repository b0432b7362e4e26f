//go:build !linux

package launch

import (
	"context"
	"fmt"
	"os"

	"github.com/amdrun/amdrun/internal/plan"
)

// Supported says whether Run can start workers here (Linux only); plans
// can be made anywhere.
const Supported = false

// OwnCPUs is unknown off Linux: nil.
func OwnCPUs() []int { return nil }

// Job is a running amdrun launch (Linux only).
type Job struct{ PID, UID int }

// Off Linux nothing runs: Run, ProbeContainment, FindJob and AskStacks
// return ErrNotSupported, ShimMain and KeeperMain print it and return 1.
func Run(ctx context.Context, p *plan.Plan, o RunOptions) (int, error) { return 1, ErrNotSupported }
func ProbeContainment(self string) (Containment, error)                { return ContainAuto, ErrNotSupported }
func FindJob(pid int) (Job, error)                                     { return Job{}, ErrNotSupported }
func AskStacks(j Job, native bool) (string, error)                     { return "", ErrNotSupported }
func ShimMain(args []string) int                                       { return notSupported() }
func KeeperMain(args []string) int                                     { return notSupported() }

func notSupported() int {
	fmt.Fprintln(os.Stderr, ErrNotSupported)
	return 1
}

// Elsewhere the modes are names only, for --contain to parse.
func init() {
	for _, c := range []Containment{ContainPIDNamespace, ContainUserNamespace, ContainSubreaper} {
		register(containMode{name: c})
	}
}
