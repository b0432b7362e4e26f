//go:build linux

package host

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

func TestNUMANodes(t *testing.T) {
	got, err := NUMANodes(testutil.Testdata(t, "host", "two-node"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, twoNode) {
		t.Errorf("got %+v, want %+v", got, twoNode)
	}
}

func TestNUMANodesLiveSystem(t *testing.T) {
	// A kernel without NUMA has no such directory, a container's partial
	// sysfs may have it without a node: nothing to read here.
	if nodes, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*"); len(nodes) == 0 {
		t.Skip("no /sys/devices/system/node/nodeN here")
	}
	nodes, err := NUMANodes("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) < 1 {
		t.Fatal("no NUMA node")
	}
	total := 0
	for _, n := range nodes {
		total += len(n.CPUs)
	}
	if total < 1 {
		t.Errorf("no CPU in %+v", nodes)
	}
	t.Logf("%d NUMA nodes, %d CPUs", len(nodes), total)
}
