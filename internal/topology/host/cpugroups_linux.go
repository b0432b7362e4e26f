//go:build linux

package host

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/ghw/pkg/cpu"
	"github.com/jaypipes/ghw/pkg/memory"

	"github.com/amdrun/amdrun/internal/topology"
)

// CPUGroups reads the sockets and level-3 caches of the host's CPUs under
// the directory root ("/" on a live system; "" means "/", so that
// --sysfs-root moves it with the rest) through github.com/jaypipes/ghw:
// its cpu package for each logical CPU's physical package
// (sys/devices/system/cpu/cpuN/topology and proc/cpuinfo), its memory
// package for the caches of each of nodes (nodeN/cpuM/cache/indexK:
// level, type, id, size). Only the CPUs of nodes (ReadNUMA's online
// CPUs) are kept.
//
// ghw reports what it cannot read as a warning and goes on with a
// shorter answer; every such warning is an error here, naming the first,
// as is a CPU of nodes that is in no socket or a NUMA node with CPUs but
// no level-3 cache: a binding to a socket or a core complex is right or
// refused, never made from half a tree.
func CPUGroups(root string, nodes []topology.NUMANode) (*topology.CPUGroups, error) {
	if root == "" {
		root = "/"
	}
	rec := &warnRecorder{}
	// An explicit context replaces ghw's environment-derived one, so
	// GHW_CHROOT and GHW_DISABLE_WARNINGS cannot move or hide the read.
	ctx := ghw.WithLogger(slog.New(rec))(ghw.WithChroot(root)(context.Background()))
	online := map[int]bool{}
	for _, n := range nodes {
		for _, c := range n.CPUs {
			online[c] = true
		}
	}
	info, err := cpu.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("host: CPU topology under %s: %w", root, err)
	}
	g := &topology.CPUGroups{}
	inSocket := map[int]bool{}
	for _, p := range info.Processors {
		var cpus []int
		for _, core := range p.Cores {
			for _, c := range core.LogicalProcessors {
				if online[c] && !inSocket[c] {
					inSocket[c] = true
					cpus = append(cpus, c)
				}
			}
		}
		if len(cpus) > 0 {
			slices.Sort(cpus)
			g.Sockets = append(g.Sockets, cpus)
		}
	}
	for _, n := range nodes {
		if len(n.CPUs) == 0 {
			continue
		}
		caches, err := memory.CachesForNode(ctx, n.ID)
		if err != nil {
			return nil, fmt.Errorf("host: caches of NUMA node %d under %s: %w", n.ID, root, err)
		}
		found := false
		for _, c := range caches {
			if c.Level != 3 {
				continue
			}
			var cpus []int
			for _, lp := range c.LogicalProcessors {
				if online[int(lp)] {
					cpus = append(cpus, int(lp))
				}
			}
			if len(cpus) == 0 {
				continue
			}
			slices.Sort(cpus)
			found = true
			if !slices.ContainsFunc(g.L3, func(s []int) bool { return slices.Equal(s, cpus) }) {
				g.L3 = append(g.L3, cpus)
			}
		}
		if !found {
			return nil, fmt.Errorf("host: NUMA node %d under %s: no level-3 cache listed for its CPUs", n.ID, root)
		}
	}
	if w := rec.first(); w != "" {
		return nil, fmt.Errorf("host: CPU topology under %s: %s", root, w)
	}
	for c := range online {
		if !inSocket[c] {
			return nil, fmt.Errorf("host: CPU topology under %s: CPU %d is in no socket", root, c)
		}
	}
	slices.SortFunc(g.L3, func(a, b []int) int { return a[0] - b[0] })
	return g, nil
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
