//go:build linux

package host

import (
	"os"

	"github.com/amdrun/amdrun/internal/topology"
)

// NUMANodes returns the host's NUMA nodes read by ReadNUMA under the
// directory root ("/" on a live system; "" means "/"), so that
// --sysfs-root and AMDRUN_SYSFS_ROOT move it with the KFD tree.
func NUMANodes(root string) ([]topology.NUMANode, error) {
	if root == "" {
		root = "/"
	}
	return ReadNUMA(os.DirFS(root))
}
