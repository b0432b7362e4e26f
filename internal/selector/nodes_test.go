package selector

import (
	"fmt"
	"math/rand/v2"
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

// newMI300XCPXNodeOf builds a CPX node like newMI300XCPXNode with parts
// partitions in all (63 or 64), 8 per GPU. With noise > 0 every link is
// "measured": its bandwidth off by a uniform random share in
// [-noise, +noise] (seeded, so each run is the same).
func newMI300XCPXNodeOf(t testing.TB, parts int, noise float64, seed uint64) *topology.Model {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	m := &topology.Model{Source: "test mi300x cpx", Vendor: topology.VendorAMD,
		NUMANodes: []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}, {ID: 1, CPUs: []int{2, 3}}}}
	for i := 0; i < parts; i++ {
		g := i / 8
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i,
			Vendor: topology.VendorAMD, Name: "MI300X", NUMANode: g / 4,
			Package: fmt.Sprintf("gpu%d", g), Partition: i % 8})
	}
	for a := 0; a < parts; a++ {
		for b := a + 1; b < parts; b++ {
			bw := topology.XGMILinkBandwidth
			if a/8 == b/8 {
				bw = 819200
			}
			l := topology.Link{A: a, B: b, Type: topology.LinkXGMI, Hops: 1, Direct: true}
			if noise > 0 {
				bw = int64(float64(bw) * (1 + noise*(2*r.Float64()-1)))
				l.Measured = true
				m.Bandwidth = "measured"
			}
			l.MinBandwidth, l.MaxBandwidth = bw, bw
			m.Links = append(m.Links, l)
		}
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}

// newDistinctNode builds n devices on two NUMA nodes whose links all have
// distinct bandwidths (20-100 GB/s in a random order): nothing is
// interchangeable, the hardest input for the search.
func newDistinctNode(t testing.TB, n int, seed uint64) *topology.Model {
	r := rand.New(rand.NewPCG(seed, seed))
	pairs := n * (n - 1) / 2
	perm := r.Perm(pairs)
	bw := make([]int64, n*n)
	k := 0
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			w := 20000 + int64(perm[k])*80000/int64(pairs)*1 + int64(perm[k])%7
			bw[a*n+b], bw[b*n+a] = w, w
			k++
		}
	}
	return newFlatNode(t, n, func(a, b int) int64 { return bw[a*n+b] }, func(i int) int { return i % 2 })
}

// newFlatNode builds n devices whose links have the bandwidths bw(a, b)
// returns (0: no direct link, host bandwidth), NUMA node numa(i).
func newFlatNode(t testing.TB, n int, bw func(a, b int) int64, numa func(i int) int) *topology.Model {
	t.Helper()
	return buildNode(t, "test flat", n, numa, func(a, b int) (topology.Link, bool) {
		w := bw(a, b)
		return topology.Link{Type: topology.LinkXGMI, MinBandwidth: w, MaxBandwidth: w, Direct: true}, w > 0
	})
}

// buildNode makes a finished model of n devices, device i on NUMA node
// numa(i), with the link link(a, b) gives for each pair a < b (none when
// it says false: Finish adds a host link).
func buildNode(t testing.TB, source string, n int, numa func(i int) int, link func(a, b int) (topology.Link, bool)) *topology.Model {
	t.Helper()
	m, err := buildModel(source, n, numa, link)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// buildModel is buildNode returning Finish's error.
func buildModel(source string, n int, numa func(i int) int, link func(a, b int) (topology.Link, bool)) (*topology.Model, error) {
	m := &topology.Model{Source: source}
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
			if l, ok := link(a, b); ok {
				l.A, l.B = a, b
				m.Links = append(m.Links, l)
			}
		}
	}
	return m, m.Finish()
}

// dgx1Matrix is `nvidia-smi topo -m` of a DGX-1 with 8 V100-SXM2, the
// NVLink hybrid cube mesh (testdata/public/
// nvidia-smi-topo-m-v100-sxm2-8gpu-dgx1-like-1nic.txt): GPUs 0-3 and 4-7
// each fully linked by one or two NVLinks, GPU i to i+4 too, SYS
// elsewhere. The capture gives no NUMA node.
var dgx1Matrix = [8][8]string{
	{"X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"},
	{"NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"},
	{"NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"},
	{"NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"},
	{"NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"},
	{"SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"},
	{"SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"},
	{"SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"},
}

// newDGX1Node builds the DGX-1 of dgx1Matrix with amdrun's assumptions:
// 25 GB/s per NVLink, SYS at 16 GB/s.
func newDGX1Node(t testing.TB) *topology.Model {
	t.Helper()
	return buildNode(t, "test dgx-1", 8, func(int) int { return -1 }, func(a, b int) (topology.Link, bool) {
		l := topology.Link{Type: topology.LinkPCIe, Level: dgx1Matrix[a][b]}
		var c int
		if _, err := fmt.Sscanf(l.Level, "NV%d", &c); err == nil {
			l.Type, l.Count, l.Direct = topology.LinkNVLink, c, true
		}
		return l, true
	})
}

// newPCIeNode builds n GPUs on PCIe only, the level of each pair from
// level(a, b) and the NUMA node from numa(i); Finish assumes the
// bandwidths (32 GB/s for PIX, PXB and PHB, 24 for NODE, 16 for SYS).
func newPCIeNode(t testing.TB, n int, level func(a, b int) string, numa func(i int) int) *topology.Model {
	t.Helper()
	return buildNode(t, "test pcie", n, numa, func(a, b int) (topology.Link, bool) {
		return topology.Link{Type: topology.LinkPCIe, Level: level(a, b)}, true
	})
}
