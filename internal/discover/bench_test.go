package discover

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// liveRoot lays out a sysfs root as a live system has it: the MI300X CPX
// KFD tree (63 partitions) under sys/class/kfd/kfd/topology and the
// two-node host tree under sys/devices/system/node.
func liveRoot(tb testing.TB) string {
	tb.Helper()
	host := testutil.Testdata(tb, "host", "two-node")
	return testutil.LinkRoot(tb, map[string]string{
		"sys/class/kfd/kfd/topology": testutil.KFD(tb, "topo-mi300-cpx", "topology"),
		"sys/devices/system/node":    filepath.Join(host, "sys", "devices", "system", "node"),
	})
}

// BenchmarkDiscoverSysfs is discovery as `amdrun --source sysfs` does it
// on a 63-partition MI300X CPX node with two NUMA nodes: the KFD tree,
// the process list and the host's NUMA nodes.
func BenchmarkDiscoverSysfs(b *testing.B) {
	root := liveRoot(b)
	for b.Loop() {
		m, err := Discover(context.Background(), Options{Source: "sysfs", SysfsRoot: root})
		if err != nil || m.N() != 63 || len(m.NUMANodes) != 2 {
			b.Fatalf("%v %v", m, err)
		}
	}
}
