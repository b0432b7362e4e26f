package selector

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// tieredCPX is the real KFD CPX tree (63 partitions of 8 MI300X,
// testdata/kfd/topo-mi300-cpx) with 25/50/100 GB/s tiers between its
// GPUs, the shape issue 35 asks about; the GPUs are numbered in the
// tree's package order 0-7 and layout says which pair is on which tier:
//   - 0 (tieredCPX, the benchmark's): GPUs 2k and 2k+1 at 100 GB/s, the
//     rest of a half (0-3, 4-7) at 50 GB/s, across the halves 25 GB/s;
//   - 1: tier (7a + 7b + ab) mod 3 (25, 50, 100 GB/s for 0, 1, 2);
//   - 2: by distance: |a-b| = 1 at 100 GB/s, 2 at 50, farther 25;
//   - 3: tier (a xor b) mod 3.
//
// Partitions of one GPU keep the captured 819.2 GB/s; every link is then
// measured, off by a uniform share in ±3% (seeded).
func tieredCPX(t testing.TB) *topology.Model { return tieredCPXBy(t, 0) }

func tieredCPXBy(t testing.TB, layout int) *topology.Model {
	m := readKFD(t, "topo-mi300-cpx")
	var pkgs []string
	for _, d := range m.Devices {
		if !slices.Contains(pkgs, d.Package) {
			pkgs = append(pkgs, d.Package)
		}
	}
	gpu := func(i int) int { return slices.Index(pkgs, m.Devices[i].Package) }
	r := rand.New(rand.NewPCG(35, 35))
	tiers := []int64{25000, 50000, 100000}
	for i := range m.Links {
		l := &m.Links[i]
		ga, gb := gpu(l.A), gpu(l.B)
		bw := l.MaxBandwidth
		switch {
		case ga == gb:
		case layout == 1:
			bw = tiers[(7*ga+7*gb+ga*gb)%3]
		case layout == 2:
			bw = tiers[max(0, 3-abs(ga-gb))%3]
		case layout == 3:
			bw = tiers[(ga^gb)%3]
		case ga/2 == gb/2:
			bw = 100000
		case ga/4 == gb/4:
			bw = 50000
		default:
			bw = 25000
		}
		bw = int64(float64(bw) * (1 + 0.03*(2*r.Float64()-1)))
		l.MinBandwidth, l.MaxBandwidth, l.Measured, l.Assumed = bw, bw, true, false
	}
	m.Bandwidth = "measured"
	return m
}

func abs(x int) int { return max(x, -x) }

// Issue 35: on the tiered CPX 63 nodes both policies are proven at every
// N at the default work. The ring's min cut was the hard part: with five
// runner-ups kept, 7, 23, 25 and 17 of the N of layouts 0-3 were not
// proven (gaps up to 66% on the min cut); with the choice searched alone
// 0, 1, 0, 2 (layout 3 N=33 needs 14,346 units); a leaf whose degree
// bounds cannot enter the list is now skipped before its ring search.
func TestTieredCPXExactEveryN(t *testing.T) {
	for layout := 0; layout < 4; layout++ {
		m := tieredCPXBy(t, layout)
		for _, p := range []Policy{Tree, Ring} {
			for n := 1; n <= len(m.Devices); n++ {
				if testing.Short() && n%4 != 1 {
					continue
				}
				ch, err := Select(m, Request{N: n, Budget: time.Hour, Alternatives: -1}, p)
				if err != nil {
					t.Fatal(err)
				}
				if !ch.Exact {
					t.Errorf("layout %d %s N=%d: not exact, gap %.4f on %s (%d units)", layout, p, n, ch.Gap, ch.GapTerm, ch.Work)
				}
			}
		}
	}
}
