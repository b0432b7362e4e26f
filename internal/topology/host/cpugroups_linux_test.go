//go:build linux

package host

import (
	"errors"
	"fmt"
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

// TestCPUGroupsThinTrees: what a tree does not tell (a file missing or
// unparsable, a VM without cache directories, a tree without
// proc/cpuinfo) leaves the CPUs concerned out of their groups, and
// SocketsGap or L3Gap says which and why in one line; the rest is
// answered. ghw's warnings make a node's caches unknown, never merged,
// and its panics on empty files are caught.
func TestCPUGroupsThinTrees(t *testing.T) {
	const sys = "sys/devices/system"
	write := func(p, s string) func(string) error {
		return func(root string) error { return os.WriteFile(filepath.Join(root, p), []byte(s), 0o644) }
	}
	removeCaches := func(root string) error {
		dirs, _ := filepath.Glob(filepath.Join(root, sys, "node/node2/cpu*/cache"))
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				return err
			}
		}
		return nil
	}
	tests := []struct {
		name             string
		breakF           func(root string) error
		sockets, l3      int // groups answered
		socketGap, l3Gap string
	}{
		{"unreadable package id", write(sys+"/cpu/cpu5/topology/physical_package_id", "x\n"), 2, 8, "no socket read for CPU(s) 5 under", ""},
		{"CPU missing from sys/devices/system/cpu", func(root string) error {
			return os.RemoveAll(filepath.Join(root, sys, "cpu/cpu20"))
		}, 2, 8, "no socket read for CPU(s) 20 under", ""},
		{"no proc/cpuinfo", func(root string) error { return os.Remove(filepath.Join(root, "proc/cpuinfo")) }, 0, 8,
			"no socket read for CPU(s) 0-31 under", ""},
		{"no cache directories on node 2", removeCaches, 2, 6, "", "NUMA node 2 under ROOT: no level-3 cache listed for CPU(s) 16-23 (node/nodeN/cpuM/cache)"},
		{"unreadable cache level", write(sys+"/node/node0/cpu1/cache/index3/level", "three\n"), 2, 6, "", "NUMA node 0 under ROOT: caches unreadable: "},
		{"empty cache level", write(sys+"/node/node0/cpu1/cache/index3/level", ""), 2, 6, "", "NUMA node 0 under ROOT: caches unreadable: ghw failed: "},
		{"no cache id and no shared_cpu_map", func(root string) error {
			return os.Remove(filepath.Join(root, sys, "node/node0/cpu1/cache/index3/id"))
		}, 2, 6, "", "NUMA node 0 under ROOT: caches unreadable: open "},
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
		l3Gap := strings.ReplaceAll(tt.l3Gap, "ROOT", root)
		if err != nil || len(g.Sockets) != tt.sockets || len(g.L3) != tt.l3 ||
			!gapIs(g.SocketsGap, tt.socketGap) || !gapIs(g.L3Gap, l3Gap) {
			t.Errorf("%s: got %+v, %v; want %d sockets, %d L3 groups, gaps %q and %q", tt.name, g, err, tt.sockets, tt.l3, tt.socketGap, l3Gap)
		}
	}
}

// gapIs: got starts with want, and is one line; want "" wants "".
func gapIs(got, want string) bool {
	if want == "" {
		return got == ""
	}
	return strings.HasPrefix(got, want) && !strings.Contains(got, "\n")
}

// TestCPUGroupsOfflineAndOldKernels: an offline CPU (left out of its
// node's cpulist) is left out of its groups; caches without an id
// (kernels before 4.20) are told apart by their shared_cpu_map.
func TestCPUGroupsOfflineAndOldKernels(t *testing.T) {
	const sys = "sys/devices/system"
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

	// Old kernels give no cache id: ghw tells the caches apart by
	// shared_cpu_map, made here from the fixture's shared_cpu_list.
	root = copyTree(t)
	ids, _ := filepath.Glob(filepath.Join(root, sys, "node/node*/cpu*/cache/index*/id"))
	if len(ids) == 0 {
		t.Fatal("the fixture has no cache ids")
	}
	for _, p := range ids {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(p), "shared_cpu_list"))
		if err != nil {
			t.Fatal(err)
		}
		cpus, _ := topology.ParseCPUList(string(b))
		mask := 0
		for _, c := range cpus {
			mask |= 1 << c
		}
		if err := errors.Join(os.Remove(p), os.WriteFile(filepath.Join(filepath.Dir(p), "shared_cpu_map"), fmt.Appendf(nil, "%08x\n", mask), 0o644)); err != nil {
			t.Fatal(err)
		}
	}
	if nodes, err = NUMANodes(root); err != nil {
		t.Fatal(err)
	}
	if g, err := CPUGroups(root, nodes); err != nil || len(g.L3) != 8 || !reflect.DeepEqual(g.L3[1], span(4, 7)) || g.L3Gap != "" {
		t.Errorf("without cache ids: %+v, %v; want the 8 complexes by shared_cpu_map", g, err)
	}
}

// TestCPUGroupsLiveSystem reads this host: what it offers is answered
// whole. A host without the files (a VM without cache directories, a
// container's partial sysfs) skips that part, saying which.
func TestCPUGroupsLiveSystem(t *testing.T) {
	nodes, err := NUMANodes("/")
	if err != nil {
		t.Skip("no NUMA nodes here:", err)
	}
	g, err := CPUGroups("/", nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sockets, %d L3 caches", len(g.Sockets), len(g.L3))
	c := nodes[0].CPUs
	if len(c) == 0 {
		t.Skip("NUMA node 0 has no CPU")
	}
	cpu := "/sys/devices/system/cpu/cpu" + strconv.Itoa(c[0])
	if _, err := os.Stat(cpu + "/topology/physical_package_id"); err != nil {
		t.Skip("this host does not tell sockets:", err)
	}
	if len(g.Sockets) == 0 || g.SocketsGap != "" {
		t.Errorf("live sockets: %+v (%s)", g.Sockets, g.SocketsGap)
	}
	if _, err := os.Stat(cpu + "/cache/index3"); err != nil {
		t.Skip("this host lists no level-3 cache:", err)
	}
	if len(g.L3) == 0 || g.L3Gap != "" {
		t.Errorf("live L3: %+v (%s)", g.L3, g.L3Gap)
	}
}
