package selector

import (
	"fmt"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// newMI250Node builds the seed's MI250 node from its
// `rocm-smi --shownodesbw` matrix (min-max MB/s, 0-0 = no direct link):
// GPUs 0-3 on NUMA 0, 4-7 on NUMA 1. Pairs without a direct link get the
// model's host PCIe bandwidth from Finish.
func newMI250Node(t testing.TB, busy ...int) *topology.Model {
	t.Helper()
	matrix := [8][8]string{
		{"N/A", "50000-200000", "50000-50000", "0-0", "0-0", "0-0", "50000-100000", "0-0"},
		{"50000-200000", "N/A", "0-0", "50000-50000", "0-0", "50000-50000", "0-0", "0-0"},
		{"50000-50000", "0-0", "N/A", "50000-200000", "50000-100000", "0-0", "0-0", "0-0"},
		{"0-0", "50000-50000", "50000-200000", "N/A", "0-0", "0-0", "0-0", "50000-50000"},
		{"0-0", "0-0", "50000-100000", "0-0", "N/A", "50000-200000", "50000-50000", "0-0"},
		{"0-0", "50000-50000", "0-0", "0-0", "50000-200000", "N/A", "0-0", "50000-50000"},
		{"50000-100000", "0-0", "0-0", "0-0", "50000-50000", "0-0", "N/A", "50000-200000"},
		{"0-0", "0-0", "0-0", "50000-50000", "0-0", "50000-50000", "50000-200000", "N/A"},
	}
	m := &topology.Model{Source: "test mi250", Vendor: topology.VendorAMD,
		NUMANodes: []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}, {ID: 1, CPUs: []int{2, 3}}}}
	for i := 0; i < 8; i++ {
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i,
			Vendor: topology.VendorAMD, Name: "MI250X", NUMANode: i / 4,
			Package: fmt.Sprintf("oam%d", i/2)})
	}
	for a := 0; a < 8; a++ {
		for b := a + 1; b < 8; b++ {
			var lo, hi int64
			if _, err := fmt.Sscanf(matrix[a][b], "%d-%d", &lo, &hi); err != nil {
				t.Fatalf("matrix %d,%d: %v", a, b, err)
			}
			if hi == 0 {
				continue
			}
			m.Links = append(m.Links, topology.Link{A: a, B: b, Type: topology.LinkXGMI,
				Hops: 1, Weight: 15, MinBandwidth: lo, MaxBandwidth: hi, Direct: true})
		}
	}
	for _, d := range busy {
		m.Devices[d].Processes = 1
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}

// newMI300XCPXNode builds an MI300X node in CPX mode: 8 GPUs of 8
// partitions each except the last with 7 (63 devices). Partitions of one
// GPU share a Package and talk at 819200 MB/s; partitions of different
// GPUs at the model's assumed XGMI bandwidth (50000 MB/s). GPUs 0-3 are on
// NUMA 0, 4-7 on NUMA 1.
func newMI300XCPXNode(t testing.TB) *topology.Model {
	t.Helper()
	m := &topology.Model{Source: "test mi300x cpx", Vendor: topology.VendorAMD,
		NUMANodes: []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}, {ID: 1, CPUs: []int{2, 3}}}}
	var gpu []int
	for g := 0; g < 8; g++ {
		parts := 8
		if g == 7 {
			parts = 7
		}
		for p := 0; p < parts; p++ {
			i := len(m.Devices)
			m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i,
				Vendor: topology.VendorAMD, Name: "MI300X", NUMANode: g / 4,
				Package: fmt.Sprintf("gpu%d", g), Partition: p})
			gpu = append(gpu, g)
		}
	}
	n := len(m.Devices)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			bw := topology.XGMILinkBandwidth
			if gpu[a] == gpu[b] {
				bw = 819200
			}
			m.Links = append(m.Links, topology.Link{A: a, B: b, Type: topology.LinkXGMI,
				Hops: 1, MinBandwidth: bw, MaxBandwidth: bw, Direct: true})
		}
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}

// newFlatNode builds n devices whose links have the bandwidths bw(a, b)
// returns (0: no direct link, host bandwidth), NUMA node numa(i).
func newFlatNode(t testing.TB, n int, bw func(a, b int) int64, numa func(i int) int) *topology.Model {
	t.Helper()
	m := &topology.Model{Source: "test flat"}
	ids := map[int]bool{}
	for i := 0; i < n; i++ {
		nn := numa(i)
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: nn})
		if nn >= 0 && !ids[nn] {
			ids[nn] = true
			m.NUMANodes = append(m.NUMANodes, topology.NUMANode{ID: nn})
		}
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if w := bw(a, b); w > 0 {
				m.Links = append(m.Links, topology.Link{A: a, B: b, Type: topology.LinkXGMI,
					MinBandwidth: w, MaxBandwidth: w, Direct: true})
			}
		}
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}
