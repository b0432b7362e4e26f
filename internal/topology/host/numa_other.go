//go:build !linux

package host

import (
	"fmt"

	"github.com/amdrun/amdrun/internal/topology"
)

// NUMANodes returns the host's NUMA nodes; on this system it always
// returns an error wrapping ErrNotSupported.
func NUMANodes(root string) ([]topology.NUMANode, error) {
	return nil, fmt.Errorf("host: NUMA nodes: %w", ErrNotSupported)
}
