package plan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// TestPlanFairShares (issue 34.4): an exclusive rank's CPUs are its
// devices' share of their NUMA node (the node's CPUs divided by its
// devices, the remainder to the lowest), whoever else runs, so jobs on
// other devices of the node get disjoint CPUs; a slot leased in part is
// made up from free CPUs; --cpus-per-rank takes more only if free.
func TestPlanFairShares(t *testing.T) {
	node := func(n int) []topology.NUMANode {
		cpus := make([]int, n)
		for i := range cpus {
			cpus[i] = i
		}
		return []topology.NUMANode{{ID: 0, CPUs: cpus}}
	}
	dev := func(idx ...int) []topology.Device {
		var out []topology.Device
		for _, i := range idx {
			out = append(out, topology.Device{Index: i, RuntimeIndex: i, NUMANode: 0})
		}
		return out
	}
	l3 := &topology.CPUGroups{Sockets: [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, L3: [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}}
	tests := []struct {
		name       string
		cpus, gpus int
		devs       []topology.Device
		bind       BindMode
		busy       []int
		perRank    int
		want       []string
		bound      BindMode
		warning    string
	}{
		{name: "2 CPUs, 2 GPUs: device 1 gets CPU 1", cpus: 2, gpus: 2, devs: dev(1), want: []string{"1"}},
		{name: "2 CPUs, 2 GPUs: device 0 gets CPU 0", cpus: 2, gpus: 2, devs: dev(0), busy: []int{1}, want: []string{"0"}},
		{name: "remainder to the lowest device", cpus: 5, gpus: 2, devs: dev(0, 1), want: []string{"0-2", "3-4"}},
		{name: "a slot leased in part is made up", cpus: 8, gpus: 4, devs: dev(2), busy: []int{5}, want: []string{"0,4"}},
		{name: "more if free", cpus: 8, gpus: 4, devs: dev(0), busy: []int{2, 3}, perRank: 3, want: []string{"0-1,4"}},
		{name: "more only if free", cpus: 8, gpus: 4, devs: dev(0), busy: []int{2, 3, 4, 5, 6, 7}, perRank: 3, want: []string{"0-1"},
			warning: "bind exclusive: --cpus-per-rank 3: the other CPUs of the ranks' NUMA nodes are leased or other devices' shares: local rank 0 got 2"},
		{name: "no free CPU: the node, shared", cpus: 2, gpus: 2, devs: dev(1), busy: []int{0, 1}, want: []string{"0-1"}, bound: BindNUMA,
			warning: "bind exclusive: other amdrun jobs lease CPUs of NUMA node 0 (0-1 of its CPUs 0-1; local rank 0's share is 1): ranks share their NUMA nodes' CPUs (bind numa)"},
		{name: "more GPUs than CPUs: no shares, no --cpus-per-rank", cpus: 2, gpus: 4, devs: dev(0, 1), perRank: 2, want: []string{"0", "1"},
			warning: "bind exclusive: --cpus-per-rank applies to GPU ranks on NUMA nodes with a CPU per GPU: the ranks split their nodes' CPUs"},
		{name: "core-complex, as many complexes as devices: a complex", cpus: 8, gpus: 2, devs: dev(1), bind: BindCoreComplex, want: []string{"0-3"}},
		{name: "core-complex, fewer complexes than devices: the share", cpus: 8, gpus: 4, devs: dev(1), bind: BindCoreComplex, want: []string{"2-3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bind, bound := tt.bind, tt.bound
			if bind == "" {
				bind = BindExclusive
			}
			if bound == "" {
				bound = bind
			}
			var peers []int
			for i := range tt.gpus {
				peers = append(peers, i)
			}
			p, err := NewPlan(Spec{Devices: tt.devs, HostNUMA: node(tt.cpus), CPUGroups: l3, BusyCPUs: tt.busy, NodeDevices: map[int][]int{0: peers},
				CPUsPerRank: tt.perRank, Argv: []string{"w"}, Bind: bind, Env: []string{"OMP_NUM_THREADS=1"}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range p.Ranks {
				got = append(got, topology.FormatCPUList(r.CPUs))
			}
			var warns []string
			for _, w := range p.Warnings {
				if !strings.HasPrefix(w, "OMP_NUM_THREADS") {
					warns = append(warns, w)
				}
			}
			if tt.want != nil && !reflect.DeepEqual(got, tt.want) || p.Bound != bound || tt.warning == "" && len(warns) > 0 || tt.warning != "" && !reflect.DeepEqual(warns, []string{tt.warning}) {
				t.Errorf("cpus %q bound %s warnings %q; want %q %s %q", got, p.Bound, warns, tt.want, bound, tt.warning)
			}
		})
	}
}
