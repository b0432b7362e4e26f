package launch

import (
	"errors"
	"fmt"

	"github.com/amdrun/amdrun/internal/topology"
)

// shimArgs is a parsed shim command line.
type shimArgs struct {
	cpus, mems []int
	policy     MemPolicy
	argv       []string
}

// parseShimArgs parses "--cpus LIST --mems LIST --mempolicy P -- argv...";
// every flag is optional, "--" and a command are not.
func parseShimArgs(args []string) (*shimArgs, error) {
	sa := &shimArgs{policy: MemNone}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			sa.argv = args[i+1:]
			if len(sa.argv) == 0 || sa.argv[0] == "" {
				return nil, errors.New("no command after --")
			}
			return sa, nil
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
		case "--mempolicy":
			sa.policy, err = ParseMemPolicy(v)
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
func ShimArgv(self string, cpus, mems []int, pol MemPolicy, argv []string) []string {
	args := []string{self, ShimArg,
		"--cpus", topology.FormatCPUList(cpus),
		"--mems", topology.FormatCPUList(mems),
		"--mempolicy", string(pol),
		"--"}
	return append(args, argv...)
}
