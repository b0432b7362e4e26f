package launch

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

type shimArgs struct {
	cpus, mems []int
	policy     plan.MemPolicy
	guard      bool // stay as the rank's guard, keeping the held files
	argv       []string
	// localCPUs and localMems are every local rank's lists (--local-cpus).
	localCPUs, localMems [][]int
}

// parseShimArgs parses "--cpus LIST --mems LIST --mempolicy P [--guard]
// -- argv..."; only "--" and a command are required.
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
	return slices.Concat([]string{self, ShimArg}, bindArgs(cpus, mems, pol), []string{"--"}, argv)
}

// guardArgv is the argv of rank r's guard.
func guardArgv(self string, r *plan.Rank) []string {
	args := []string{self, ShimArg}
	if r.Bound() {
		args = append(args, bindArgs(r.CPUs, r.Mems, r.MemPolicy)...)
	}
	return slices.Concat(args, []string{"--guard", "--"}, r.Argv)
}

func bindArgs(cpus, mems []int, pol plan.MemPolicy) []string {
	return []string{"--cpus", topology.FormatCPUList(cpus), "--mems", topology.FormatCPUList(mems), "--mempolicy", string(pol)}
}

// Per-rank binding under torch's elastic agent (issue 23), which starts
// every worker itself: it runs the shim as its --no_python entrypoint with
// every local rank's lists ("--local-cpus 0-3/4-7 --local-mems 0/0"), and
// the shim binds the LOCAL_RANK-th and execs the worker.

// localSep separates the local ranks' lists (a CPU list has no slash).
const localSep = "/"

// LocalShimArgs are the shim flags that bind each local rank of p by
// LOCAL_RANK; nil when no rank of p is bound.
func LocalShimArgs(p *plan.Plan) []string {
	if !slices.ContainsFunc(p.Ranks, func(r plan.Rank) bool { return r.Bound() }) {
		return nil
	}
	cpus := make([]string, len(p.Ranks))
	mems := make([]string, len(p.Ranks))
	pol := plan.MemNone
	for i, r := range p.Ranks {
		cpus[i], mems[i] = topology.FormatCPUList(r.CPUs), topology.FormatCPUList(r.Mems)
		if len(r.Mems) > 0 {
			pol = r.MemPolicy
		}
	}
	return []string{"--local-cpus", strings.Join(cpus, localSep), "--local-mems", strings.Join(mems, localSep), "--mempolicy", string(pol)}
}

// parseLocalLists parses --local-cpus or --local-mems: a list per local
// rank, separated by localSep (empty: that rank unbound).
func parseLocalLists(v string) ([][]int, error) {
	parts := strings.Split(v, localSep)
	out := make([][]int, len(parts))
	for i, p := range parts {
		if p == "" {
			continue
		}
		l, err := topology.ParseCPUList(p)
		if err != nil {
			return nil, fmt.Errorf("local rank %d: %w", i, err)
		}
		out[i] = l
	}
	return out, nil
}

// pickLocalRank sets sa's CPUs and memory nodes to those of LOCAL_RANK
// when the shim was given per-rank lists; a missing or out-of-range
// LOCAL_RANK is an error.
func pickLocalRank(sa *shimArgs, localRank string, ok bool) error {
	if sa.localCPUs == nil && sa.localMems == nil {
		return nil
	}
	if !ok {
		return fmt.Errorf("--local-cpus: LOCAL_RANK is not set")
	}
	lr, err := strconv.Atoi(localRank)
	n := max(len(sa.localCPUs), len(sa.localMems))
	if err != nil || lr < 0 || lr >= n {
		return fmt.Errorf("--local-cpus: LOCAL_RANK %q is not one of the %d local ranks", localRank, n)
	}
	if lr < len(sa.localCPUs) {
		sa.cpus = sa.localCPUs[lr]
	}
	if lr < len(sa.localMems) {
		sa.mems = sa.localMems[lr]
	}
	return nil
}
