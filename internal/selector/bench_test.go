package selector

import (
	"fmt"
	"math/rand/v2"
	"testing"
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
			b.Run(fmt.Sprintf("%s/N=%d", pol.Name(), n), func(b *testing.B) {
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
			b.Run(fmt.Sprintf("%s/N=%d", pol.Name(), n), func(b *testing.B) {
				for b.Loop() {
					if _, err := Select(m, Request{N: n}, pol); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
