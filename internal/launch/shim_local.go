package launch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

// Per-rank binding under torch's elastic agent (issue 23), which starts
// every worker itself: it runs the shim as its --no_python entrypoint with
// every local rank's lists ("--local-cpus 0-3/4-7 --local-mems 0/0"), and
// the shim binds the LOCAL_RANK-th and execs the worker.

// localSep separates the local ranks' lists (a CPU list has no slash).
const localSep = "/"

// LocalShimArgs are the shim flags that bind each local rank of p by
// LOCAL_RANK; nil when no rank of p is bound.
func LocalShimArgs(p *plan.Plan) []string {
	bound := false
	cpus := make([]string, len(p.Ranks))
	mems := make([]string, len(p.Ranks))
	pol := plan.MemNone
	for i, r := range p.Ranks {
		bound = bound || r.Bound()
		cpus[i], mems[i] = topology.FormatCPUList(r.CPUs), topology.FormatCPUList(r.Mems)
		if len(r.Mems) > 0 {
			pol = r.MemPolicy
		}
	}
	if !bound {
		return nil
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
