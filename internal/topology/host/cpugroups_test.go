//go:build linux

package host

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// FuzzCPUGroups: whatever the files of a two-CPU, one-node tree hold,
// CPUGroups answers without panicking (ghw slices files it expects to
// end in a newline) and never guesses: a CPU is in at most one socket
// and one level-3 group, of CPUs of the node only, and a CPU left out of
// the sockets or the caches is named in SocketsGap or L3Gap, one line.
func FuzzCPUGroups(f *testing.F) {
	// The epyc-2p tree's files for CPUs 0 and 4 (two core complexes).
	epyc := func(p string) string {
		return string(testutil.ReadFile(f, testutil.Testdata(f, "host", "epyc-2p", "sys/devices/system", p)))
	}
	f.Add(epyc("cpu/cpu0/topology/physical_package_id"), epyc("cpu/cpu4/topology/physical_package_id"),
		epyc("node/node0/cpu0/cache/index3/level"), epyc("node/node0/cpu4/cache/index3/level"),
		epyc("node/node0/cpu0/cache/index3/id"), epyc("node/node0/cpu4/cache/index3/id"), "")
	f.Add("0\n", "1\n", "3\n", "3\n", "0\n", "0\n", "3\n")
	f.Add("0\n", "0\n", "3\n", "3\n", "0\n", "1\n", "1\n")
	f.Add("x", "0", "three", "3", "", "", "")
	f.Fuzz(func(t *testing.T, pkg0, pkg1, level0, level1, id0, id1, sharedMap string) {
		const cpu, node = "sys/devices/system/cpu/", "sys/devices/system/node/node0/"
		files := map[string]string{
			cpu + "cpu0/topology/physical_package_id": pkg0,
			cpu + "cpu1/topology/physical_package_id": pkg1,
			node + "cpu0/cache/index3/level":          level0,
			node + "cpu1/cache/index3/level":          level1,
			node + "cpu0/cache/index3/id":             id0,
			node + "cpu1/cache/index3/shared_cpu_map": sharedMap,
			"proc/cpuinfo": "processor\t: 0\nvendor_id\t: X\n\nprocessor\t: 1\nvendor_id\t: X\n\n",
		}
		if id1 != "" {
			files[node+"cpu1/cache/index3/id"] = id1
		}
		root := t.TempDir()
		for p, s := range files {
			if os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755) != nil || os.WriteFile(filepath.Join(root, p), []byte(s), 0o644) != nil {
				t.Fatal("cannot write the tree")
			}
		}
		g, err := CPUGroups(root, []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []int{0, 1} {
			for what, groups := range map[string][][]int{"sockets": g.Sockets, "L3": g.L3} {
				in := 0
				for _, s := range groups {
					in += len(slices.DeleteFunc(slices.Clone(s), func(x int) bool { return x != c }))
					if slices.ContainsFunc(s, func(x int) bool { return x != 0 && x != 1 }) {
						t.Fatalf("%s group %v of CPUs not of the node: %+v", what, s, g)
					}
				}
				gap := map[string]string{"sockets": g.SocketsGap, "L3": g.L3Gap}[what]
				if in > 1 || in == 0 && gap == "" || slices.Contains([]byte(gap), '\n') {
					t.Fatalf("CPU %d in %d %s groups, gap %q: %+v", c, in, what, gap, g)
				}
			}
		}
	})
}
