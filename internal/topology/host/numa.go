package host

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// NodeDir is where, relative to a sysfs root, the kernel lists the NUMA
// nodes (one nodeN directory each).
const NodeDir = "sys/devices/system/node"

// ReadNUMA returns the host's NUMA nodes under fsys (os.DirFS("/") on a
// live system), sorted by id, each with the CPUs its nodeN/cpulist
// names. The kernel prints there the node's CPUs that are online
// (drivers/base/node.c ANDs the node's mask with cpu_online_mask), so an
// offline CPU is left out; a node without CPUs (memory only) gets an
// empty list. It reads one file per node and nothing else.
//
// It returns an error wrapping fs.ErrNotExist when NodeDir is missing (a
// captured tree without its host part), an error naming NodeDir when it
// holds no nodeN entry or a cpulist cannot be read, and a
// *topology.ParseError naming the file when a cpulist does not parse.
func ReadNUMA(fsys fs.FS) ([]topology.NUMANode, error) {
	ents, err := fs.ReadDir(fsys, NodeDir)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	var ids []int
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		if id, err := strconv.Atoi(rest); err == nil && id >= 0 && strconv.Itoa(id) == rest {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("host: %s: no NUMA nodes", NodeDir)
	}
	sort.Ints(ids)
	out := make([]topology.NUMANode, 0, len(ids))
	for _, id := range ids {
		p := path.Join(NodeDir, "node"+strconv.Itoa(id), "cpulist")
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		cpus, err := topology.ParseCPUList(string(data))
		if err != nil {
			return nil, topology.NewParseError("host "+p, 1, 0, topology.ErrSyntax, "%v", err)
		}
		if cpus == nil {
			cpus = []int{}
		}
		out = append(out, topology.NUMANode{ID: id, CPUs: cpus})
	}
	return out, nil
}
