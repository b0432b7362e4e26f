//go:build linux

package host

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw"
	ghwtopology "github.com/jaypipes/ghw/pkg/topology"

	"github.com/amdrun/amdrun/internal/topology"
)

// NUMANodes returns the host's NUMA nodes, sorted by id, each with its
// online logical CPUs, as ghw reads them from sys/devices/system/node under
// root ("/" on a live system; "" means "/"), with ghw's warnings silenced
// and its external tools off.
//
// ghw also reads each node's meminfo, hugepages and distance files and
// quietly returns only the nodes before the first it cannot read (old
// kernels lack the Hugetlb line of /proc/meminfo). When ghw returns fewer
// nodes than there are nodeN directories, NUMANodes reads each node's
// cpulist itself instead. It returns an error naming the path when the
// node directory is missing or empty or a cpulist does not parse.
func NUMANodes(root string) ([]topology.NUMANode, error) {
	if root == "" {
		root = "/"
	}
	dir := filepath.Join(root, "sys", "devices", "system", "node")
	ids, err := nodeIDs(dir)
	if err != nil {
		return nil, err
	}
	if nodes, err := numaFromGHW(root); err == nil && len(nodes) == len(ids) {
		return nodes, nil
	}
	out := make([]topology.NUMANode, 0, len(ids))
	for _, id := range ids {
		p := filepath.Join(dir, fmt.Sprintf("node%d", id), "cpulist")
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		cpus, err := topology.ParseCPUList(string(data))
		if err != nil {
			return nil, &topology.ParseError{Source: "host " + p, Line: 1,
				Err: fmt.Errorf("%w: %v", topology.ErrSyntax, err)}
		}
		out = append(out, topology.NUMANode{ID: id, CPUs: cpus})
	}
	return out, nil
}

// nodeIDs lists the nodeN entries of dir, sorted; none is an error.
func nodeIDs(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	var ids []int
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), "node"); ok {
			if id, err := strconv.Atoi(rest); err == nil && id >= 0 {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("host: %s: no NUMA nodes", dir)
	}
	sort.Ints(ids)
	return ids, nil
}

// numaFromGHW asks ghw for the NUMA nodes under root.
func numaFromGHW(root string) ([]topology.NUMANode, error) {
	info, err := ghwtopology.New(ghw.WithChroot(root), ghw.WithDisableWarnings(), ghw.WithDisableTools())
	if err != nil {
		return nil, fmt.Errorf("host: ghw: %w", err)
	}
	out := make([]topology.NUMANode, 0, len(info.Nodes))
	for _, n := range info.Nodes {
		cpus := []int{}
		for _, c := range n.Cores {
			cpus = append(cpus, c.LogicalProcessors...)
		}
		sort.Ints(cpus)
		out = append(out, topology.NUMANode{ID: n.ID, CPUs: cpus})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}
