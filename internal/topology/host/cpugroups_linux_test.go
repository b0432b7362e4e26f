//go:build linux

package host

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

func span(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

// TestCPUGroupsEPYC2P: the two-socket EPYC 7313 tree (NPS2, SMT off):
// two sockets of 16 CPUs, eight core complexes of 4, as lscpu -e shows
// such a machine (testdata/SOURCES.md).
func TestCPUGroupsEPYC2P(t *testing.T) {
	root := testutil.Testdata(t, "host", "epyc-2p")
	nodes, err := NUMANodes(root)
	if err != nil {
		t.Fatal(err)
	}
	g, err := CPUGroups(root, nodes)
	if err != nil {
		t.Fatal(err)
	}
	want := &topology.CPUGroups{Sockets: [][]int{span(0, 15), span(16, 31)}}
	for c := 0; c < 32; c += 4 {
		want.L3 = append(want.L3, span(c, c+3))
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("got %+v\nwant %+v", g, want)
	}
	if g.SocketOf(17) != 1 || g.SocketOf(3) != 0 || g.SocketOf(99) != -1 {
		t.Errorf("SocketOf: %d %d %d", g.SocketOf(17), g.SocketOf(3), g.SocketOf(99))
	}
}

// copyTree copies the epyc-2p tree into a temporary directory, so that a
// test can break one file.
func copyTree(t *testing.T) string {
	t.Helper()
	src := testutil.Testdata(t, "host", "epyc-2p")
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
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

// TestCPUGroupsRefusesHalfATree: a file that is missing or does not parse
// is an error naming it (where ghw, which read the tree before, only
// warned and answered shorter), as are CPUs without a socket and a node
// without a level-3 cache; an offline CPU (left out of its node's
// cpulist) is left out of its groups; caches without an id (kernels
// before 4.20) are told apart by their shared_cpu_list.
func TestCPUGroupsRefusesHalfATree(t *testing.T) {
	const sys = "sys/devices/system"
	tests := []struct {
		name   string
		breakF func(root string) error
		errMsg string
	}{
		{"unreadable package id", func(root string) error {
			return os.WriteFile(filepath.Join(root, sys, "cpu/cpu5/topology/physical_package_id"), []byte("x\n"), 0o644)
		}, `CPU 5 is in no socket: host sys/devices/system/cpu/cpu5/topology/physical_package_id: line 1: not a number: "x"`},
		{"CPU missing from sys/devices/system/cpu", func(root string) error {
			return os.RemoveAll(filepath.Join(root, sys, "cpu/cpu20"))
		}, "CPU 20 is in no socket"},
		{"no L3 on node 2", func(root string) error {
			for c := 16; c < 24; c++ {
				if err := os.RemoveAll(filepath.Join(root, sys, "node/node2", "cpu"+itoa(c), "cache")); err != nil {
					return err
				}
			}
			return nil
		}, "no level-3 cache listed"},
		{"unreadable cache level", func(root string) error {
			return os.WriteFile(filepath.Join(root, sys, "node/node0/cpu1/cache/index3/level"), []byte("three\n"), 0o644)
		}, `node/node0/cpu1/cache/index3/level: line 1: not a number: "three"`},
		{"unreadable cache id", func(root string) error {
			return os.WriteFile(filepath.Join(root, sys, "node/node0/cpu1/cache/index3/id"), []byte("\n"), 0o644)
		}, `node/node0/cpu1/cache/index3/id: line 1: not a number: ""`},
		{"no cache id and no shared_cpu_list", func(root string) error {
			idx := filepath.Join(root, sys, "node/node0/cpu1/cache/index3")
			return errors.Join(os.Remove(filepath.Join(idx, "id")), os.Remove(filepath.Join(idx, "shared_cpu_list")))
		}, "index3/shared_cpu_list: no such file"},
	}
	for _, tt := range tests {
		root := copyTree(t)
		if err := tt.breakF(root); err != nil {
			t.Fatal(err)
		}
		nodes, err := NUMANodes(root)
		if err != nil {
			t.Fatal(err)
		}
		g, err := CPUGroups(root, nodes)
		if err == nil || !strings.Contains(err.Error(), tt.errMsg) || !strings.HasPrefix(err.Error(), "host: ") {
			t.Errorf("%s: got %+v, error %v; want an error with %q", tt.name, g, err, tt.errMsg)
		}
	}

	root := copyTree(t)
	if err := os.WriteFile(filepath.Join(root, sys, "node/node0/cpulist"), []byte("0-2,4-7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes, err := NUMANodes(root)
	if err != nil {
		t.Fatal(err)
	}
	g, err := CPUGroups(root, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2}; !reflect.DeepEqual(g.L3[0], want) || g.SocketOf(3) != -1 {
		t.Errorf("offline CPU 3: L3[0] %v (want %v), socket %d", g.L3[0], want, g.SocketOf(3))
	}

	root = copyTree(t)
	ids, _ := filepath.Glob(filepath.Join(root, sys, "node/node*/cpu*/cache/index*/id"))
	if len(ids) == 0 {
		t.Fatal("the fixture has no cache ids")
	}
	for _, p := range ids {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := CPUGroups(root, nodes); err != nil || len(g.L3) != 8 || !reflect.DeepEqual(g.L3[1], span(4, 7)) {
		t.Errorf("without cache ids: %+v, %v; want the 8 complexes by shared_cpu_list", g, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestCPUGroupsLiveSystem(t *testing.T) {
	nodes, err := NUMANodes("/")
	if err != nil {
		t.Skip("no NUMA nodes here:", err)
	}
	g, err := CPUGroups("/", nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Sockets) == 0 || len(g.L3) == 0 {
		t.Errorf("live: %+v", g)
	}
	t.Logf("%d sockets, %d L3 caches", len(g.Sockets), len(g.L3))
}
