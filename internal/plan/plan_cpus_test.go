package plan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// epycHost is the testdata/host/epyc-2p layout as values: two sockets of
// 16 CPUs, NPS2 (NUMA nodes of 8 CPUs, two per socket), a core complex
// (level-3 cache) per 4 CPUs.
func epycHost() ([]topology.NUMANode, *topology.CPUGroups) {
	g := &topology.CPUGroups{}
	var nodes []topology.NUMANode
	for n := 0; n < 4; n++ {
		var cpus []int
		for c := n * 8; c < n*8+8; c++ {
			cpus = append(cpus, c)
		}
		nodes = append(nodes, topology.NUMANode{ID: n, CPUs: cpus})
	}
	for s := 0; s < 2; s++ {
		g.Sockets = append(g.Sockets, append(append([]int(nil), nodes[2*s].CPUs...), nodes[2*s+1].CPUs...))
	}
	for c := 0; c < 32; c += 4 {
		g.L3 = append(g.L3, []int{c, c + 1, c + 2, c + 3})
	}
	return nodes, g
}

// epycDevices are n devices, device i on NUMA node node(i).
func epycDevices(n int, node func(int) int) []topology.Device {
	devs := make([]topology.Device, n)
	for i := range devs {
		devs[i] = topology.Device{Index: i, RuntimeIndex: i, NUMANode: node(i)}
	}
	return devs
}

func TestPlanSocketAndCoreComplex(t *testing.T) {
	nodes, g := epycHost()
	tests := []struct {
		name     string
		devs     []topology.Device
		bind     BindMode
		groups   *topology.CPUGroups
		busy     []int
		cpus     []string // per rank
		mems     []string
		bound    BindMode
		lease    string
		warnings []string
	}{
		{name: "socket: both nodes of the device's socket", devs: epycDevices(2, func(i int) int { return 1 + 2*i }), bind: BindSocket, groups: g,
			cpus: []string{"0-15", "16-31"}, mems: []string{"0-1", "2-3"}, bound: BindSocket},
		{name: "core-complex: one L3 each, in CPU order", devs: epycDevices(3, func(i int) int { return 2 }), bind: BindCoreComplex, groups: g,
			cpus: []string{"16-19", "20-23", "16-19"}, mems: []string{"2", "2", "2"}, bound: BindCoreComplex, lease: "16-23",
			warnings: []string{"bind core-complex: more ranks than core complexes on NUMA node 2 (3 ranks, 2 core complexes): some ranks share a core complex"}},
		{name: "core-complex: a leased complex is skipped", devs: epycDevices(1, func(int) int { return 0 }), bind: BindCoreComplex, groups: g, busy: []int{1},
			cpus: []string{"4-7"}, mems: []string{"0"}, bound: BindCoreComplex, lease: "4-7"},
		{name: "exclusive: leased CPUs left out", devs: epycDevices(2, func(int) int { return 0 }), bind: BindExclusive, busy: []int{0, 1, 2},
			cpus: []string{"3-5", "6-7"}, mems: []string{"0", "0"}, bound: BindExclusive, lease: "3-7"},
		{name: "exclusive: too few free CPUs falls back to the node", devs: epycDevices(2, func(int) int { return 1 }), bind: BindExclusive, busy: []int{8, 9, 10, 11, 12, 13, 14},
			cpus: []string{"8-15", "8-15"}, mems: []string{"1", "1"}, bound: BindNUMA,
			warnings: []string{"bind exclusive: other amdrun jobs lease CPUs of NUMA node 1 (8-14 of its CPUs 8-15; 2 ranks here): ranks share their NUMA nodes' CPUs (bind numa)"}},
		{name: "core-complex: both complexes leased falls back", devs: epycDevices(1, func(int) int { return 3 }), bind: BindCoreComplex, groups: g, busy: []int{24, 31},
			cpus: []string{"24-31"}, mems: []string{"3"}, bound: BindNUMA,
			warnings: []string{"bind core-complex: other amdrun jobs lease CPUs of NUMA node 3 (24,31 of its CPUs 24-31; 1 ranks here): ranks share their NUMA nodes' CPUs (bind numa)"}},
		{name: "socket without CPU groups binds to the node", devs: epycDevices(1, func(int) int { return 1 }), bind: BindSocket,
			cpus: []string{"8-15"}, mems: []string{"1"}, bound: BindNUMA,
			warnings: []string{"bind socket: the host's sockets and caches are unknown: ranks are bound to their NUMA nodes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(Spec{Devices: tt.devs, HostNUMA: nodes, CPUGroups: tt.groups, BusyCPUs: tt.busy,
				Argv: []string{"w"}, Bind: tt.bind, Mem: MemBind, Env: []string{"OMP_NUM_THREADS=1"}})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range p.Ranks {
				if got := topology.FormatCPUList(r.CPUs); got != tt.cpus[i] {
					t.Errorf("rank %d: cpus %s, want %s", i, got, tt.cpus[i])
				}
				if got := topology.FormatCPUList(r.Mems); got != tt.mems[i] {
					t.Errorf("rank %d: mems %s, want %s", i, got, tt.mems[i])
				}
			}
			if p.Bound != tt.bound || topology.FormatCPUList(p.LeaseCPUs) != tt.lease {
				t.Errorf("bound %s, lease %q; want %s, %q", p.Bound, topology.FormatCPUList(p.LeaseCPUs), tt.bound, tt.lease)
			}
			var warns []string
			for _, w := range p.Warnings {
				if !strings.HasPrefix(w, "OMP_NUM_THREADS") {
					warns = append(warns, w)
				}
			}
			if !reflect.DeepEqual(warns, tt.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", warns, tt.warnings)
			}
		})
	}
}
