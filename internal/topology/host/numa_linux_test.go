//go:build linux

package host

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

var twoNode = []topology.NUMANode{{ID: 0, CPUs: []int{0, 1, 4, 5}}, {ID: 1, CPUs: []int{2, 3, 6}}}

func TestNUMAFromGHW(t *testing.T) {
	// The ghw path itself: offline cpu7 is left out.
	got, err := numaFromGHW(testutil.Testdata(t, "host", "two-node"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, twoNode) {
		t.Errorf("got %+v, want %+v", got, twoNode)
	}
}

func TestNUMANodes(t *testing.T) {
	got, err := NUMANodes(testutil.Testdata(t, "host", "two-node"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, twoNode) {
		t.Errorf("got %+v, want %+v", got, twoNode)
	}
}

// copyTree copies a testdata tree into a temporary directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestNUMANodesFallback(t *testing.T) {
	// Without the Hugetlb line (old kernels) ghw returns no node at all;
	// NUMANodes then reads the cpulist files.
	root := copyTree(t, testutil.Testdata(t, "host", "two-node"))
	if err := os.WriteFile(filepath.Join(root, "proc", "meminfo"), []byte("MemTotal: 1 kB\nHugepagesize: 2048 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g, _ := numaFromGHW(root); len(g) != 0 {
		t.Fatalf("ghw still read %d nodes; the test no longer covers the fallback", len(g))
	}
	got, err := NUMANodes(root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, twoNode) {
		t.Errorf("got %+v, want %+v", got, twoNode)
	}

	// A broken cpulist is then an error naming the file.
	if err := os.WriteFile(filepath.Join(root, "sys/devices/system/node/node1/cpulist"), []byte("2-x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NUMANodes(root); err == nil || !strings.Contains(err.Error(), "node1/cpulist: line 1: malformed input") {
		t.Errorf("bad cpulist: %v", err)
	}
}

func TestNUMANodesMissing(t *testing.T) {
	_, err := NUMANodes(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "sys/devices/system/node") {
		t.Errorf("error %v, want one naming sys/devices/system/node", err)
	}
	empty := t.TempDir()
	if err := os.MkdirAll(filepath.Join(empty, "sys/devices/system/node/power"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := NUMANodes(empty); err == nil || !strings.Contains(err.Error(), "no NUMA nodes") {
		t.Errorf("empty node dir: %v", err)
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
