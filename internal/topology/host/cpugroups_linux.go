//go:build linux

package host

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/ghw/pkg/cpu"
	"github.com/jaypipes/ghw/pkg/memory"

	"github.com/amdrun/amdrun/internal/printable"
	"github.com/amdrun/amdrun/internal/topology"
)

// CPUGroups reads the sockets and level-3 caches of the CPUs of nodes
// under root ("" means "/") through ghw, chrooted there, never guessing: a
// CPU whose socket or caches do not read is in no group, and SocketsGap or
// L3Gap says which and why. The error is for other systems only.
func CPUGroups(root string, nodes []topology.NUMANode) (*topology.CPUGroups, error) {
	root = cmp.Or(root, "/")
	var all []int
	for _, n := range nodes {
		all = append(all, n.CPUs...)
	}
	g := &topology.CPUGroups{}
	g.Sockets, g.SocketsGap = sockets(root, all)
	for _, n := range nodes {
		if len(n.CPUs) == 0 {
			continue
		}
		l3, why := nodeL3(root, n)
		for _, cpus := range l3 {
			if !slices.ContainsFunc(g.L3, func(s []int) bool { return slices.Equal(s, cpus) }) {
				g.L3 = append(g.L3, cpus)
			}
		}
		if why != "" && g.L3Gap == "" {
			g.L3Gap = fmt.Sprintf("NUMA node %d under %s: %s", n.ID, root, why)
		}
	}
	slices.SortFunc(g.L3, func(a, b []int) int { return a[0] - b[0] })
	return g, nil
}

// sockets groups cpus by ghw's physical package; gap names the CPUs in
// none and why.
func sockets(root string, cpus []int) (out [][]int, gap string) {
	rec, ctx := ghwContext(root)
	var info *cpu.Info
	err := safely(func() (err error) { info, err = cpu.New(ctx); return err })
	in := map[int]bool{}
	for i := 0; err == nil && i < len(info.Processors); i++ {
		if p := info.Processors[i]; p.ID >= 0 { // -1: ghw could not read physical_package_id
			var lps []int
			for _, core := range p.Cores {
				lps = append(lps, core.LogicalProcessors...)
			}
			out = appendGroup(out, in, cpus, lps)
		}
	}
	if lost := without(cpus, in); len(lost) > 0 {
		gap = fmt.Sprintf("no socket read for CPU(s) %s under %s (cpu/cpuN/topology/physical_package_id, proc/cpuinfo)%s",
			topology.FormatCPUList(lost), root, rec.why(err))
	}
	return out, gap
}

// nodeL3 groups node n's CPUs by level-3 cache (ghw's CachesForNode); why
// names the CPUs in none and why (no group is kept if ghw warned).
func nodeL3(root string, n topology.NUMANode) (out [][]int, why string) {
	rec, ctx := ghwContext(root)
	var caches []*memory.Cache
	err := safely(func() (err error) { caches, err = memory.CachesForNode(ctx, n.ID); return err })
	if err != nil || rec.first != "" {
		return nil, "caches unreadable" + rec.why(err)
	}
	in := map[int]bool{}
	for _, c := range caches {
		if c.Level == 3 {
			lps := make([]int, len(c.LogicalProcessors))
			for i, lp := range c.LogicalProcessors {
				lps[i] = int(lp)
			}
			out = appendGroup(out, in, n.CPUs, lps)
		}
	}
	if lost := without(n.CPUs, in); len(lost) > 0 {
		why = fmt.Sprintf("no level-3 cache listed for CPU(s) %s (node/nodeN/cpuM/cache)", topology.FormatCPUList(lost))
	}
	return out, why
}

// appendGroup appends the CPUs of lps in cpus and not yet in (which marks
// them), sorted, unless there are none.
func appendGroup(groups [][]int, in map[int]bool, cpus, lps []int) [][]int {
	var g []int
	for _, c := range lps {
		if !in[c] && slices.Contains(cpus, c) {
			in[c] = true
			g = append(g, c)
		}
	}
	if len(g) == 0 {
		return groups
	}
	slices.Sort(g)
	return append(groups, g)
}

func without(cpus []int, in map[int]bool) []int {
	out := slices.DeleteFunc(slices.Clone(cpus), func(c int) bool { return in[c] })
	slices.Sort(out)
	return out
}

// ghwContext is a context for one ghw read chrooted at root, whose
// warnings rec keeps, so that GHW_CHROOT and GHW_DISABLE_WARNINGS cannot
// move or hide the read.
func ghwContext(root string) (*warnRecorder, context.Context) {
	rec := &warnRecorder{}
	return rec, ghw.WithLogger(slog.New(rec))(ghw.WithChroot(root)(context.Background()))
}

// safely runs read, turning a panic in ghw (it slices files it expects
// to end in a newline) into an error.
func safely(read func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ghw failed: %v", r)
		}
	}()
	return read()
}

type warnRecorder struct {
	mu    sync.Mutex
	first string
}

func (w *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnRecorder) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnRecorder) WithGroup(string) slog.Handler                { return w }

func (w *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.first = cmp.Or(w.first, r.Message)
	return nil
}

// why is ": " and err, else ghw's first warning, as one printable line.
func (w *warnRecorder) why(err error) string {
	m := w.first
	if err != nil {
		m = err.Error()
	}
	if m == "" {
		return ""
	}
	return ": " + printable.String(strings.Join(strings.Fields(m), " "), 200)
}
