package launch

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ranksPerCPU bounds the ranks of one node: more per CPU is a typo (issue
// 26: --nproc-per-node 1000000 took 2.3 GB to plan).
const ranksPerCPU = 4

// procsPerRank is the fewest processes a rank costs: itself and its guard.
const procsPerRank = 2

// RankLimit is the most ranks one node may run: ranksPerCPU per CPU of
// this process and, but for root, what ulimit -u leaves room for with the
// guards; why names the bound that decided.
func RankLimit() (n int, why string) {
	cpus := runtime.NumCPU()
	n, why = ranksPerCPU*cpus, fmt.Sprintf("%d per CPU, %d CPUs", ranksPerCPU, cpus)
	var rl unix.Rlimit
	if os.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		// The limit counts every task of the user: leave amdrun some.
		if room := (int64(rl.Cur) - 16) / procsPerRank; room < int64(n) {
			n = max(int(room), 0)
			why = fmt.Sprintf("ulimit -u %d leaves room for %d ranks with their guards", rl.Cur, n)
			if n == 0 {
				why = fmt.Sprintf("ulimit -u %d leaves no room for a rank and its guard", rl.Cur)
			}
		}
	}
	return n, why
}
