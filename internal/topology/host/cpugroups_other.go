//go:build !linux

package host

import (
	"fmt"

	"github.com/amdrun/amdrun/internal/topology"
)

// CPUGroups returns the host's sockets and level-3 caches; on this
// system it always returns an error wrapping ErrNotSupported.
func CPUGroups(root string, nodes []topology.NUMANode) (*topology.CPUGroups, error) {
	return nil, fmt.Errorf("host: CPU topology: %w", ErrNotSupported)
}
