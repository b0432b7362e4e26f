package host

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// NUMANodes returns ReadNUMA of the directory root ("" means "/"), so that
// --sysfs-root moves it with the KFD tree; ErrNotSupported off Linux.
func NUMANodes(root string) ([]topology.NUMANode, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("host: NUMA nodes: %w", ErrNotSupported)
	}
	root = cmp.Or(root, "/")
	return ReadNUMA(os.DirFS(root))
}

// NodeDir is where, under a sysfs root, the kernel lists the NUMA nodes.
const NodeDir = "sys/devices/system/node"

// ReadNUMA returns the host's NUMA nodes under fsys by id, each with the
// online CPUs of its cpulist (none for a memory-only node); no NodeDir
// gives an error wrapping fs.ErrNotExist.
func ReadNUMA(fsys fs.FS) ([]topology.NUMANode, error) {
	ents, err := fs.ReadDir(fsys, NodeDir)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	var ids []int
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "node")
		if id, err := strconv.Atoi(rest); ok && err == nil && id >= 0 && strconv.Itoa(id) == rest {
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
