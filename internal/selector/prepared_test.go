package selector

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/kfd"
)

// preparedNodes are the nodes the Prepared tests change the state of:
// the KFD trees of the ROCm device plugin's tests, the CPX and MI250
// test nodes, and the real topologies of testdata up to 64 devices.
func preparedNodes(t *testing.T) []realTopology {
	var out []realTopology
	for _, tree := range []string{"topology-parsing-mi308", "topo-mi300-cpx", "topo-mi210-xgmi-pcie"} {
		m, err := kfd.Read(kfd.DirFS(testutil.KFD(t, tree)), nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, realTopology{"kfd " + tree, m})
	}
	out = append(out, realTopology{"cpx", newMI300XCPXNode(t)}, realTopology{"mi250", newMI250Node(t)},
		realTopology{"noisy cpx", newMI300XCPXNodeOf(t, 63, 0.03, 7)})
	tops, _ := realTopologies(t)
	for _, top := range tops {
		if len(top.m.Devices) <= 64 {
			out = append(out, top)
		}
	}
	return out
}

// A Prepared answers as Select on the model does while the devices'
// state changes between requests: busy devices (allowed, so they stay
// candidates and only the classes change), loads and NUMA nodes. It
// keeps the last request's class tables; a kept table used after the
// state it was built for changed gives another answer (the loads order
// a class's members, busy devices split classes).
func TestPreparedSameAsSelect(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 2))
	for _, top := range preparedNodes(t) {
		m := cloneModel(top.m)
		pp := Prepare(m)
		nd := len(m.Devices)
		for step := 0; step < 12; step++ {
			if step > 0 {
				// change the state of a few devices, or none
				for range r.IntN(3) {
					d := &m.Devices[r.IntN(nd)]
					switch r.IntN(3) {
					case 0:
						d.Busy = !d.Busy
					case 1:
						d.UtilPercent = float64(r.IntN(4) * 25)
					default:
						d.NUMANode = r.IntN(2)
					}
				}
			}
			for _, p := range []Policy{Tree, Ring} {
				n := 1 + r.IntN(nd)
				if testing.Short() && n > 24 {
					n = 1 + n%24
				}
				req := Request{N: n, AllowBusy: true}
				if step%3 == 2 {
					req.Exclude = []int{r.IntN(nd)} // not every device: no kept tables
					if n == nd {
						req.N--
					}
					if req.N == 0 {
						continue
					}
				}
				want, err := Select(m, req, p)
				if err != nil {
					t.Fatal(err)
				}
				got, err := pp.Select(req, p)
				if err != nil {
					t.Fatal(err)
				}
				if !sameChoice(want, got) {
					t.Errorf("%s step %d %s N=%d: prepared %v %s, Select %v %s", top.name, step, p, req.N,
						got.Devices, got.Score, want.Devices, want.Score)
				}
			}
		}
	}
}

// cloneModel copies m's devices, so a test may change their state.
func cloneModel(m *topology.Model) *topology.Model {
	c := *m
	c.Devices = slices.Clone(m.Devices)
	c.Links = slices.Clone(m.Links)
	return &c
}

// greedyStart finds on the classes the start the device-by-device walk
// finds: the lowest device with the most bandwidth over links >= t to
// the others, among those whose component over such links holds size
// devices.
func TestGreedyStartIsTheDeviceWalk(t *testing.T) {
	nodes := append(preparedNodes(t), realTopology{"distinct 40", newDistinctNode(t, 40, 3)})
	r := rand.New(rand.NewPCG(25, 4))
	for _, top := range nodes {
		m := cloneModel(top.m)
		for i := range m.Devices {
			m.Devices[i].NUMANode = r.IntN(2) // classes split by NUMA node too
		}
		p := Prepare(m).newProblem(firstN(len(m.Devices)).list(), Tree, 1, rules{})
		b := p.newClassSearch(p.buildClasses(firstN(p.n)), 1)
		levels := []int64{0}
		for _, w := range slices.Sorted(slices.Values(p.bw)) {
			levels = append(levels, int64(w))
		}
		for _, size := range []int{1, 2, 3, p.n / 2, p.n} {
			for _, lt := range []int{0, len(levels) / 3, len(levels) / 2, len(levels) - 1} {
				th := levels[lt]
				if got, want := b.greedyStart(size, th), startByDevices(p, size, th); got != want {
					t.Errorf("%s size %d t %d: start %d, device walk %d", top.name, size, th, got, want)
				}
			}
		}
	}
}

// startByDevices is greedyStart device by device, as greedy did it
// before issue 25: union-find over every pair.
func startByDevices(p *problem, size int, t int64) int {
	n := p.n
	comp := make([]int, n)
	for a := range comp {
		comp[a] = a
	}
	find := func(a int) int {
		for comp[a] != a {
			a = comp[a]
		}
		return a
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if int64(p.bw[a*n+b]) >= t {
				if x, y := find(a), find(b); x != y {
					comp[y] = x
				}
			}
		}
	}
	compSize := make([]int, n)
	for a := 0; a < n; a++ {
		compSize[find(a)]++
	}
	start, startSum := 0, int64(-1)
	for a := 0; a < n; a++ {
		if compSize[find(a)] < size {
			continue
		}
		var s int64
		for b := 0; b < n; b++ {
			if w := int64(p.bw[a*n+b]); b != a && w >= t {
				s += w
			}
		}
		if s > startSum {
			start, startSum = a, s
		}
	}
	return start
}

// Prepare weighs every pair from the model's links, once each: its
// matrices hold what Model.BW and Model.Locality give pair by pair (the
// measured figures as their levels), on the real nodes and on nodes whose
// packages and hives are many (more than interning keeps on the stack),
// unknown for some devices, or out of order.
func TestPrepareWeighsAsTheModel(t *testing.T) {
	nodes := preparedNodes(t)
	r := rand.New(rand.NewPCG(25, 5))
	for _, groups := range []int{3, 40} {
		m := cloneModel(newDistinctNode(t, 48, uint64(groups)))
		for i := range m.Devices {
			d := &m.Devices[i]
			if g := r.IntN(groups + 1); g < groups { // one in groups+1 unknown
				d.Package = fmt.Sprintf("pkg-%d", g)
			}
			if g := r.IntN(groups + 1); g < groups {
				d.Hive = fmt.Sprintf("hive-%d", g)
			}
		}
		for i := range m.Links {
			if l := &m.Links[i]; r.IntN(3) == 0 {
				l.Type = topology.LinkPCIe
				l.Level = []string{topology.LevelPIX, topology.LevelPXB, topology.LevelNODE, topology.LevelSYS, ""}[r.IntN(5)]
			}
		}
		nodes = append(nodes, realTopology{fmt.Sprintf("48 devices, %d packages and hives", groups), m})
	}
	for _, top := range nodes {
		m := top.m
		pp := Prepare(m)
		pp.once.Do(pp.weigh)
		levels := measuredLevels(m)
		nd := len(m.Devices)
		for a := 0; a < nd; a++ {
			var deg int64
			for b := 0; b < nd; b++ {
				deg += int64(m.Locality(a, b))
			}
			if pp.deg[a] != deg {
				t.Fatalf("%s: device %d locality to the others %d, the model's %d", top.name, a, pp.deg[a], deg)
			}
			for b := 0; b < nd; b++ {
				w := m.BW(a, b)
				if l := m.Link(a, b); l != nil && l.Measured {
					w = levels[l.MaxBandwidth]
				}
				if got := int64(pp.bw[a*nd+b]); got != w {
					t.Fatalf("%s: pair %d-%d bandwidth %d, the model's %d", top.name, a, b, got, w)
				}
				if got, want := int64(pp.loc[a*nd+b]), int64(m.Locality(a, b)); got != want {
					t.Fatalf("%s: pair %d-%d locality %d, the model's %d", top.name, a, b, got, want)
				}
			}
		}
	}
}

// insertCopies keeps the limit lowest of the values inserted, sorted.
func TestInsertCopiesKeepsLowest(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 6))
	for range 200 {
		limit := r.IntN(6)
		var all []int64
		got := make([]int64, 0, limit)
		for range 1 + r.IntN(8) {
			x, k := int64(r.IntN(5)), r.IntN(4)
			for range k {
				all = append(all, x)
			}
			got = insertCopies(got, x, k, limit)
		}
		slices.Sort(all)
		if want := all[:min(limit, len(all))]; !slices.Equal(got, want) {
			t.Fatalf("insertCopies kept %v, the %d lowest are %v", got, limit, want)
		}
	}
}
