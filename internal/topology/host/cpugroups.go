package host

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// CPUDir is where, relative to a sysfs root, the kernel lists the CPUs
// (one cpuN directory each).
const CPUDir = "sys/devices/system/cpu"

// ReadCPUGroups reads the sockets and level-3 caches of the CPUs of nodes
// (ReadNUMA's online CPUs; the others are left out) under fsys
// (os.DirFS("/") on a live system):
//
//   - a CPU's socket from CPUDir/cpuN/topology/physical_package_id;
//   - the level-3 caches of each node from NodeDir/nodeN/cpuM/cache/indexK
//     (level, then id, or where the kernel gives no id, shared_cpu_list):
//     the node's CPUs with one cache make one group, as lscpu -e and
//     hwloc see them. A CPU without a cache directory lists none.
//
// A tree it cannot read completely is refused, never answered shorter:
// an error names the first file it could not read (wrapping
// fs.ErrNotExist when one is missing) or that does not parse (a
// *topology.ParseError), a NUMA node with CPUs but no level-3 cache, or
// a CPU in no socket. It reads a few small files per CPU and nothing
// else; the package read them through github.com/jaypipes/ghw before,
// which answered the same on every tree tested but cost each amdrun
// process about 1 ms at start (its package initialisation, net/http
// among it) whether or not it read anything.
func ReadCPUGroups(fsys fs.FS, nodes []topology.NUMANode) (*topology.CPUGroups, error) {
	g := &topology.CPUGroups{}
	byPackage := map[int][]int{}
	for _, n := range nodes {
		for _, c := range n.CPUs {
			id, err := readInt(fsys, path.Join(CPUDir, "cpu"+strconv.Itoa(c), "topology", "physical_package_id"))
			if err != nil {
				return nil, fmt.Errorf("CPU %d is in no socket: %w", c, err)
			}
			if !slices.Contains(byPackage[id], c) {
				byPackage[id] = append(byPackage[id], c)
			}
		}
	}
	ids := make([]int, 0, len(byPackage))
	for id := range byPackage {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		slices.Sort(byPackage[id])
		g.Sockets = append(g.Sockets, byPackage[id])
	}
	for _, n := range nodes {
		if len(n.CPUs) == 0 {
			continue
		}
		sets, err := nodeL3(fsys, n)
		if err != nil {
			return nil, err
		}
		if len(sets) == 0 {
			return nil, fmt.Errorf("NUMA node %d: no level-3 cache listed for its CPUs", n.ID)
		}
		for _, cpus := range sets {
			if !slices.ContainsFunc(g.L3, func(s []int) bool { return slices.Equal(s, cpus) }) {
				g.L3 = append(g.L3, cpus)
			}
		}
	}
	slices.SortFunc(g.L3, func(a, b []int) int { return a[0] - b[0] })
	return g, nil
}

// nodeL3 groups node n's CPUs by the level-3 cache each lists, in the
// order the caches are first met; every set is sorted.
func nodeL3(fsys fs.FS, n topology.NUMANode) ([][]int, error) {
	var keys []string
	sets := map[string][]int{}
	for _, c := range n.CPUs {
		dir := path.Join(NodeDir, "node"+strconv.Itoa(n.ID), "cpu"+strconv.Itoa(c), "cache")
		ents, err := fs.ReadDir(fsys, dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), "index") {
				continue
			}
			idx := path.Join(dir, e.Name())
			level, err := readInt(fsys, path.Join(idx, "level"))
			if err != nil {
				return nil, err
			}
			if level != 3 {
				continue
			}
			key, err := cacheKey(fsys, idx)
			if err != nil {
				return nil, err
			}
			if _, ok := sets[key]; !ok {
				keys = append(keys, key)
			}
			if !slices.Contains(sets[key], c) {
				sets[key] = append(sets[key], c)
			}
		}
	}
	out := make([][]int, 0, len(keys))
	for _, k := range keys {
		slices.Sort(sets[k])
		out = append(out, sets[k])
	}
	return out, nil
}

// cacheKey tells one cache from another: its id, or where the kernel
// gives none (before 4.20, some architectures) the CPUs it is shared by.
func cacheKey(fsys fs.FS, idx string) (string, error) {
	if id, err := readInt(fsys, path.Join(idx, "id")); err == nil {
		return "id " + strconv.Itoa(id), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	p := path.Join(idx, "shared_cpu_list")
	b, err := fs.ReadFile(fsys, p)
	if err != nil {
		return "", err
	}
	cpus, err := topology.ParseCPUList(string(b))
	if err != nil || len(cpus) == 0 {
		return "", topology.NewParseError("host "+p, 1, 0, topology.ErrSyntax, "shared_cpu_list %q", strings.TrimSpace(string(b)))
	}
	return "cpus " + topology.FormatCPUList(cpus), nil
}

// readInt reads the one decimal integer in the file p.
func readInt(fsys fs.FS, p string) (int, error) {
	b, err := fs.ReadFile(fsys, p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, topology.NewParseError("host "+p, 1, 0, topology.ErrBadNumber, "%q", s)
	}
	return v, nil
}
