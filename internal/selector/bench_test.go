package selector

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/kfd"
)

// newDGX16Node is a 16-GPU node shaped like an NVSwitch-less HGX pair of
// boards: two groups of 8 fully linked at NVLink speed inside a group,
// host PCIe between groups, with a few slower links to break symmetry.
func newDGX16Node(t testing.TB) *topology16 {
	r := rand.New(rand.NewPCG(16, 16))
	bw := make([][]int64, 16)
	for i := range bw {
		bw[i] = make([]int64, 16)
	}
	for a := 0; a < 16; a++ {
		for b := a + 1; b < 16; b++ {
			var w int64
			if a/8 == b/8 {
				w = []int64{50000, 100000, 150000, 300000}[r.IntN(4)]
			}
			bw[a][b], bw[b][a] = w, w
		}
	}
	return &topology16{bw: bw}
}

type topology16 struct{ bw [][]int64 }

func BenchmarkMI250(b *testing.B) {
	m := newMI250Node(b)
	for _, pol := range []Policy{Tree, Ring} {
		for n := 1; n <= 8; n++ {
			b.Run(fmt.Sprintf("%s/N=%d", pol.String(), n), func(b *testing.B) {
				for b.Loop() {
					if _, err := Select(m, Request{N: n}, pol); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkCPXTree(b *testing.B) {
	m := newMI300XCPXNode(b)
	for _, n := range []int{1, 2, 4, 8, 9, 12, 16, 20, 24, 32, 36, 40, 48, 56, 63} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Select(m, Request{N: n}, Tree); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCPXTreeAllN selects every N from 1 to 63 in one iteration.
func BenchmarkCPXTreeAllN(b *testing.B) {
	m := newMI300XCPXNode(b)
	for b.Loop() {
		for n := 1; n <= 63; n++ {
			if _, err := Select(m, Request{N: n}, Tree); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func Benchmark16Devices(b *testing.B) {
	d := newDGX16Node(b)
	m := newFlatNode(b, 16, func(x, y int) int64 { return d.bw[x][y] }, func(i int) int { return i / 8 })
	for _, pol := range []Policy{Tree, Ring} {
		for _, n := range []int{4, 8} {
			b.Run(fmt.Sprintf("%s/N=%d", pol.String(), n), func(b *testing.B) {
				for b.Loop() {
					if _, err := Select(m, Request{N: n}, pol); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkNoisyCPX selects every N from 1 to the partition count on a
// measured CPX matrix (every pair off by up to ±3%); issue #16 asks for
// every N exact (TestNoisyCPXExactEveryN) and under 50 ms. worst-ms is
// the slowest N's fastest time over the iterations (the minimum filters
// out a loaded machine's pauses), worst-N that N.
func BenchmarkNoisyCPX(b *testing.B) {
	for _, parts := range []int{63, 64} {
		m := newMI300XCPXNodeOf(b, parts, 0.03, 7)
		for _, pol := range []Policy{Tree, Ring} {
			b.Run(fmt.Sprintf("%s/%d", pol, parts), func(b *testing.B) {
				best := make([]time.Duration, parts+1)
				for b.Loop() {
					for n := 1; n <= parts; n++ {
						start := time.Now()
						// the time cap off: a loaded machine must not turn
						// the measurement into a failure
						ch, err := Select(m, Request{N: n, Budget: time.Minute}, pol)
						if err != nil || !ch.Exact {
							b.Fatalf("N=%d: %v exact %v", n, err, ch != nil && ch.Exact)
						}
						if d := time.Since(start); best[n] == 0 || d < best[n] {
							best[n] = d
						}
					}
				}
				worstN := 1
				for n := range best {
					if best[n] > best[worstN] {
						worstN = n
					}
				}
				b.ReportMetric(float64(best[worstN])/1e6, "worst-ms")
				b.ReportMetric(float64(worstN), "worst-N")
			})
		}
	}
}

// BenchmarkTieredCPX selects every N from 1 to 63 on the tiered CPX 63
// (tieredCPX: the real KFD CPX tree, 25/50/100 GB/s between GPUs, ±3%),
// each proven (TestTieredCPXExactEveryN).
func BenchmarkTieredCPX(b *testing.B) {
	m := tieredCPX(b)
	for _, pol := range []Policy{Tree, Ring} {
		b.Run(pol.String(), func(b *testing.B) {
			for b.Loop() {
				for n := 1; n <= 63; n++ {
					if _, err := Select(m, Request{N: n, Alternatives: -1}, pol); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkDistinct is the worst case of each policy: 128 and 256
// candidates whose links all differ (nothing interchangeable), N = 8 and
// half of them; each selection runs to the default budget. n=64 with
// the ring at N=48 and 54 are the cases issue #16 timed at 12.2 s and
// 13.8 s.
func BenchmarkDistinct(b *testing.B) {
	cases := map[int][]int{64: {48, 54}, 128: {8, 64}, 256: {8, 128}}
	for _, n := range []int{64, 128, 256} {
		m := newDistinctNode(b, n, 11)
		for _, pol := range []Policy{Tree, Ring} {
			if n == 64 && pol == Tree {
				continue
			}
			for _, size := range cases[n] {
				b.Run(fmt.Sprintf("%s/n=%d/N=%d", pol, n, size), func(b *testing.B) {
					var gap float64
					for b.Loop() {
						ch, err := Select(m, Request{N: size}, pol)
						if err != nil {
							b.Fatal(err)
						}
						gap = ch.Gap
					}
					b.ReportMetric(100*gap, "gap-%")
				})
			}
		}
	}
}

// BenchmarkPluginSizes is the ROCm device plugin's own test sizes
// (ROCm/k8s-device-plugin internal/pkg/allocator/besteffort_policy_test.go:
// MI308 4/8/16 of 32 partitions, CPX 8/56/62 of 63, MI210 2/4 of 8) on the
// same KFD trees. The plugin weighs its pairs once, in Init, and then
// answers each Allocate from them; amdrun's counterpart is Prepare, done
// once, then Prepared.Select ("prepared"). "model" is what one amdrun
// command calls on the read model, Prepare and Prepared.Select (which
// answers from settledNaive where it can, else weighs the pairs and
// searches); "search" is the same without settledNaive (the command
// before it); "read+model" reads the KFD tree first (kfd.Read), all of
// one amdrun command's selection from a cold start, the counterpart of
// the plugin's Init and Allocate together, which reads the tree's
// io_links.
// bench/rocm-plugin.sh runs it interleaved with the plugin (issue 25).
func BenchmarkPluginSizes(b *testing.B) {
	for _, tc := range []struct {
		name, tree string
		sizes      []int
	}{
		{"mi308-32", "topology-parsing-mi308", []int{4, 8, 16}},
		{"cpx-63", "topo-mi300-cpx", []int{8, 56, 62}},
		{"mi210-8", "topo-mi210-xgmi-pcie", []int{2, 4}},
	} {
		dir := testutil.KFD(b, tc.tree)
		m, err := kfd.Read(kfd.DirFS(dir), nil)
		if err != nil {
			b.Fatal(err)
		}
		pp := Prepare(m)
		cold := func(r Request) (*Choice, error) {
			m, err := kfd.Read(kfd.DirFS(dir), nil)
			if err != nil {
				return nil, err
			}
			return Prepare(m).Select(r, Tree)
		}
		for _, n := range tc.sizes {
			// one answer, as the plugin gives, and amdrun's default five
			// runner-ups on top (what --explain lists)
			for _, v := range []struct {
				name string
				alt  int
				sel  func(Request) (*Choice, error)
			}{
				// Prepare alone, the part of "model" a warm plugin did in
				// Init; "links" only walks the links for each device's
				// locality to all others, which the split term of every
				// exact answer needs: the least one command can spend
				{"prepare", -1, func(Request) (*Choice, error) { p := Prepare(m); p.once.Do(p.weigh); return nil, nil }},
				{"links", -1, func(Request) (*Choice, error) { linkDegrees(m); return nil, nil }},
				{"prepared", -1, func(r Request) (*Choice, error) { return pp.Select(r, Tree) }},
				{"prepared+5", 0, func(r Request) (*Choice, error) { return pp.Select(r, Tree) }},
				{"model", -1, func(r Request) (*Choice, error) { return Prepare(m).Select(r, Tree) }},
				{"search", -1, func(r Request) (*Choice, error) { return Prepare(m).selectBy(r, Tree, rules{}) }},
				{"read+model", -1, cold},
			} {
				b.Run(fmt.Sprintf("%s/N=%d/%s", tc.name, n, v.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := v.sel(Request{N: n, Alternatives: v.alt}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// linkDegrees is each device's locality to every other device, from one
// walk over the model's links that reads what Prepare reads of each (its
// bandwidth too) and writes no matrix (BenchmarkPluginSizes' "links").
func linkDegrees(m *topology.Model) []int64 {
	nd := len(m.Devices)
	deg, ids := make([]int64, nd), make([]int, 2*nd)
	pkg, hive := ids[:nd], ids[nd:]
	intern(pkg, m.Devices, func(d *topology.Device) string { return d.Package })
	intern(hive, m.Devices, func(d *topology.Device) string { return d.Hive })
	var top int64
	for i := range m.Links {
		l := &m.Links[i]
		a, b := l.A, l.B
		top = max(top, m.LinkBW(l))
		lc := int64(l.Locality(pkg[a] >= 0 && pkg[a] == pkg[b], hive[a] >= 0 && hive[a] == hive[b]))
		deg[a], deg[b] = deg[a]+lc, deg[b]+lc
	}
	deg[0] += top >> 62 // keeps the bandwidth read
	return deg
}
