package host

import (
	"slices"
	"testing"
	"testing/fstest"

	"github.com/amdrun/amdrun/internal/topology"
)

// FuzzReadCPUGroups: whatever the four files of a two-CPU, one-node tree
// hold, ReadCPUGroups answers without panicking, and an answer it gives
// is whole: every CPU in exactly one socket, and in an L3 group of its
// node, of CPUs of that node only.
func FuzzReadCPUGroups(f *testing.F) {
	f.Add("0\n", "1\n", "3\n", "3\n", "0\n", "0\n", "0-1\n")
	f.Add("0\n", "0\n", "3\n", "3\n", "0\n", "1\n", "0\n")
	f.Add("x", "0", "three", "3", "", "0", "")
	f.Fuzz(func(t *testing.T, pkg0, pkg1, level0, level1, id0, id1, shared string) {
		const cpu, node = "sys/devices/system/cpu/", "sys/devices/system/node/node0/"
		fsys := fstest.MapFS{
			cpu + "cpu0/topology/physical_package_id":  {Data: []byte(pkg0)},
			cpu + "cpu1/topology/physical_package_id":  {Data: []byte(pkg1)},
			node + "cpu0/cache/index3/level":           {Data: []byte(level0)},
			node + "cpu1/cache/index3/level":           {Data: []byte(level1)},
			node + "cpu0/cache/index3/id":              {Data: []byte(id0)},
			node + "cpu1/cache/index3/shared_cpu_list": {Data: []byte(shared)},
		}
		if id1 != "" {
			fsys[node+"cpu1/cache/index3/id"] = &fstest.MapFile{Data: []byte(id1)}
		}
		nodes := []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}}
		g, err := ReadCPUGroups(fsys, nodes)
		if err != nil {
			return
		}
		for _, c := range []int{0, 1} {
			in := 0
			for _, s := range g.Sockets {
				if slices.Contains(s, c) {
					in++
				}
			}
			if in != 1 {
				t.Fatalf("CPU %d in %d sockets: %+v", c, in, g)
			}
		}
		if len(g.L3) == 0 {
			t.Fatalf("an answer without an L3 group: %+v", g)
		}
		for _, s := range g.L3 {
			for _, c := range s {
				if c != 0 && c != 1 {
					t.Fatalf("L3 group with CPU %d: %+v", c, g)
				}
			}
		}
	})
}
