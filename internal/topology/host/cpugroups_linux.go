//go:build linux

package host

import (
	"fmt"
	"os"

	"github.com/amdrun/amdrun/internal/topology"
)

// CPUGroups returns the sockets and level-3 caches ReadCPUGroups reads
// under the directory root ("/" on a live system; "" means "/", so that
// --sysfs-root moves it with the rest).
func CPUGroups(root string, nodes []topology.NUMANode) (*topology.CPUGroups, error) {
	if root == "" {
		root = "/"
	}
	g, err := ReadCPUGroups(os.DirFS(root), nodes)
	if err != nil {
		return nil, fmt.Errorf("host: CPU topology under %s: %w", root, err)
	}
	return g, nil
}
