package launch

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

// shimArgs is a parsed shim command line.
type shimArgs struct {
	cpus, mems []int
	policy     plan.MemPolicy
	guard      bool // stay as the rank's guard, holding hold files
	hold       int
	argv       []string
	// localCPUs and localMems are every local rank's lists (shim_local.go).
	localCPUs, localMems [][]int
}

// parseShimArgs parses "--cpus LIST --mems LIST --mempolicy P [--guard
// --hold N] -- argv..."; only "--" and a command are required.
func parseShimArgs(args []string) (*shimArgs, error) {
	sa := &shimArgs{policy: plan.MemNone}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			sa.argv = args[i+1:]
			if len(sa.argv) == 0 || sa.argv[0] == "" {
				return nil, errors.New("no command after --")
			}
			return sa, nil
		}
		if a == "--guard" {
			sa.guard = true
			continue
		}
		if i+1 >= len(args) {
			return nil, fmt.Errorf("%s: missing value", a)
		}
		v := args[i+1]
		i++
		var err error
		switch a {
		case "--cpus":
			sa.cpus, err = topology.ParseCPUList(v)
		case "--mems":
			sa.mems, err = topology.ParseCPUList(v)
		case "--local-cpus":
			sa.localCPUs, err = parseLocalLists(v)
		case "--local-mems":
			sa.localMems, err = parseLocalLists(v)
		case "--mempolicy":
			sa.policy, err = plan.ParseMemPolicy(v)
		case "--hold":
			sa.hold, err = strconv.Atoi(v)
			if err == nil && sa.hold < 0 {
				err = errors.New("negative")
			}
		default:
			return nil, fmt.Errorf("unknown argument %q", a)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil, errors.New("missing -- before the command")
}

// ShimArgv is the argv that runs argv bound to cpus and mems (memory
// policy pol) through amdrun's bind shim, self being amdrun's own path.
func ShimArgv(self string, cpus, mems []int, pol plan.MemPolicy, argv []string) []string {
	args := []string{self, ShimArg,
		"--cpus", topology.FormatCPUList(cpus),
		"--mems", topology.FormatCPUList(mems),
		"--mempolicy", string(pol),
		"--"}
	return append(args, argv...)
}

// guardArgv is the argv of rank r's guard, holding hold files.
func guardArgv(self string, r *plan.Rank, hold int) []string {
	args := []string{self, ShimArg}
	if r.Bound() {
		args = append(args,
			"--cpus", topology.FormatCPUList(r.CPUs),
			"--mems", topology.FormatCPUList(r.Mems),
			"--mempolicy", string(r.MemPolicy))
	}
	args = append(args, "--guard", "--hold", strconv.Itoa(hold), "--")
	return append(args, r.Argv...)
}
