//go:build linux

package host

import (
	"os"
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
	if _, err := os.Stat("/sys/devices/system/node"); err != nil {
		t.Skip("no /sys/devices/system/node here")
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
