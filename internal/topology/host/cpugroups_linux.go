//go:build linux

package host

import (
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
// (ReadNUMA's online CPUs; the others are left out) under the directory
// root ("/" on a live system; "" means "/", so that --sysfs-root moves it
// with the rest) through github.com/jaypipes/ghw, chrooted there: its cpu
// package for each CPU's socket (cpu/cpuN/topology/physical_package_id,
// with proc/cpuinfo), its memory package for the caches of each node
// (node/nodeN/cpuM/cache/indexK: level, then id or shared_cpu_map).
//
// It answers what the tree tells and never refuses the host: a CPU whose
// socket ghw cannot read is in no socket, and SocketsGap says which; a
// node whose caches do not read whole (no cache directory, as on some
// VMs, or a file ghw warns about or cannot parse) has no level-3 group,
// and L3Gap says which CPUs and why. A group is never guessed: ghw's
// warnings make a node's caches unknown rather than merged. The error is
// for systems other than Linux only (cpugroups_other.go).
func CPUGroups(root string, nodes []topology.NUMANode) (*topology.CPUGroups, error) {
	if root == "" {
		root = "/"
	}
	online := map[int]bool{}
	for _, n := range nodes {
		for _, c := range n.CPUs {
			online[c] = true
		}
	}
	g := &topology.CPUGroups{}
	g.Sockets, g.SocketsGap = sockets(root, online)
	for _, n := range nodes {
		if len(n.CPUs) == 0 {
			continue
		}
		l3, why := nodeL3(root, n, online)
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

// sockets groups the online CPUs by the physical package ghw reads for
// them; gap names the online CPUs in none, and why, or is "".
func sockets(root string, online map[int]bool) (out [][]int, gap string) {
	rec, ctx := ghwContext(root)
	var info *cpu.Info
	err := safely(func() (err error) { info, err = cpu.New(ctx); return err })
	in := map[int]bool{}
	if err == nil {
		for _, p := range info.Processors {
			if p.ID < 0 { // ghw's answer for an unreadable physical_package_id
				continue
			}
			var cpus []int
			for _, core := range p.Cores {
				for _, c := range core.LogicalProcessors {
					if online[c] && !in[c] {
						in[c] = true
						cpus = append(cpus, c)
					}
				}
			}
			if len(cpus) > 0 {
				slices.Sort(cpus)
				out = append(out, cpus)
			}
		}
	}
	var lost []int
	for c := range online {
		if !in[c] {
			lost = append(lost, c)
		}
	}
	if len(lost) == 0 {
		return out, ""
	}
	slices.Sort(lost)
	return out, fmt.Sprintf("no socket read for CPU(s) %s under %s (cpu/cpuN/topology/physical_package_id, proc/cpuinfo)%s",
		topology.FormatCPUList(lost), root, rec.why(err))
}

// nodeL3 groups node n's online CPUs by their level-3 cache, as ghw's
// CachesForNode lists them; why says, when some CPUs are in none, which
// and why (and then no group of the node is kept if ghw warned).
func nodeL3(root string, n topology.NUMANode, online map[int]bool) (out [][]int, why string) {
	rec, ctx := ghwContext(root)
	var caches []*memory.Cache
	err := safely(func() (err error) { caches, err = memory.CachesForNode(ctx, n.ID); return err })
	if err != nil || rec.first() != "" {
		return nil, "caches unreadable" + rec.why(err)
	}
	in := map[int]bool{}
	for _, c := range caches {
		if c.Level != 3 {
			continue
		}
		var cpus []int
		for _, lp := range c.LogicalProcessors {
			if online[int(lp)] && slices.Contains(n.CPUs, int(lp)) {
				in[int(lp)] = true
				cpus = append(cpus, int(lp))
			}
		}
		if len(cpus) > 0 {
			slices.Sort(cpus)
			out = append(out, cpus)
		}
	}
	var lost []int
	for _, c := range n.CPUs {
		if !in[c] {
			lost = append(lost, c)
		}
	}
	if len(lost) > 0 {
		why = fmt.Sprintf("no level-3 cache listed for CPU(s) %s (node/nodeN/cpuM/cache)", topology.FormatCPUList(lost))
	}
	return out, why
}

// ghwContext is a context for one ghw read chrooted at root, whose
// warnings rec keeps. It replaces ghw's environment-derived context, so
// GHW_CHROOT and GHW_DISABLE_WARNINGS cannot move or hide the read.
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

// warnRecorder is a slog.Handler that keeps ghw's warnings.
type warnRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.msgs = append(w.msgs, r.Message)
	w.mu.Unlock()
	return nil
}

func (w *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnRecorder) WithGroup(string) slog.Handler      { return w }

func (w *warnRecorder) first() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.msgs) == 0 {
		return ""
	}
	return w.msgs[0]
}

// why is ": " and err, else ghw's first warning, on one printable line
// (it may quote a file), or "".
func (w *warnRecorder) why(err error) string {
	m := w.first()
	if err != nil {
		m = err.Error()
	}
	if m == "" {
		return ""
	}
	return ": " + printable.String(strings.Join(strings.Fields(m), " "), 200)
}
