package selector

import (
	"slices"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// Issue #16: PIX, PXB and PHB pairs all count as 32 GB/s, so locality
// decides between them: on a 4-GPU node where 0-1 and 2-3 share a PCIe
// switch, `--exclude 0 -n 2` takes 2,3 (PIX), not 1,2 (PHB).
func TestPCIeLocality(t *testing.T) {
	m := newPCIeNode(t, 4, func(a, b int) string {
		if a/2 == b/2 {
			return topology.LevelPIX
		}
		return topology.LevelPHB
	}, func(int) int { return 0 })
	for _, p := range []Policy{Tree, Ring} {
		ch, err := Select(m, Request{N: 2, Exclude: []int{0}}, p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ch.Devices, []int{2, 3}) {
			t.Errorf("%s: %v (%s), want 2,3 behind one switch", p, ch.Devices, ch.Score)
		}
	}
	// NCCL's order at equal bandwidth: PIX > PXB > PHB (all 32 GB/s).
	// Device 0 pairs with 3 over PIX, 2 over PXB, 1 over PHB; every other
	// pair is NODE (24 GB/s). Excluding the closer partners one by one
	// moves the choice down the order.
	lv := map[int]string{3: topology.LevelPIX, 2: topology.LevelPXB, 1: topology.LevelPHB}
	m = newPCIeNode(t, 4, func(a, b int) string {
		if a == 0 {
			return lv[b]
		}
		return topology.LevelNODE
	}, func(int) int { return 0 })
	for i, want := range []int{3, 2, 1} {
		ch, err := Select(m, Request{N: 2, Exclude: []int{3, 2, 1}[:i]}, Tree)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ch.Devices, []int{0, want}) {
			t.Errorf("without %v: %v (%s), want 0,%d over %s", []int{3, 2, 1}[:i], ch.Devices, ch.Score, want, lv[want])
		}
	}
}

// Issue #16: on the DGX-1 hybrid cube mesh, rings of 5 and 6 GPUs with
// the same bottleneck and min cut differ in total bandwidth; ring now
// ranks by it (0,2,3,4,7 at 314 GB/s rather than 0,1,2,4,5 at 289).
func TestCubeMeshRingTotal(t *testing.T) {
	m := newDGX1Node(t)
	for _, tt := range []struct {
		n     int
		old   []int
		total float64
	}{{5, []int{0, 1, 2, 4, 5}, 314000}, {6, nil, 446000}} {
		ch, err := Select(m, Request{N: tt.n}, Ring)
		if err != nil {
			t.Fatal(err)
		}
		tot, _ := ch.Score.Term("total")
		if tot.Value != tt.total {
			t.Errorf("N=%d: %v %s, want total %v", tt.n, ch.Devices, ch.Score, tt.total)
		}
		if tt.old != nil {
			old := Ring.Score(m, Request{}, tt.old)
			if old.Terms[0] != ch.Score.Terms[0] || old.Terms[1] != ch.Score.Terms[1] {
				t.Errorf("N=%d: %s, the old choice %s", tt.n, ch.Score, old)
			}
		}
		if ringBottleneckOf(m.BW, ch.Ring) != int64(ch.Score.Terms[0].Value) {
			t.Errorf("N=%d: ring %v does not reach %s", tt.n, ch.Ring, ch.Score)
		}
	}
}

// Issue #16: on the seed MI250 with device 2 leased, `-n 1` takes 3, the
// other half of the half-used package, not 0: a later 2-GPU job still
// finds the 200 GB/s pair 0-1.
func TestBestFitOnSharedNode(t *testing.T) {
	m := newMI250Node(t)
	held := map[int]string{2: "job 1"}
	for _, p := range []Policy{Tree, Ring} {
		ch, err := Select(m, Request{N: 1, Held: held}, p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ch.Devices, []int{3}) {
			t.Errorf("%s: %v (%s), want 3", p, ch.Devices, ch.Score)
		}
		held2 := map[int]string{2: "job 1", ch.Devices[0]: "job 2"}
		next, err := Select(m, Request{N: 2, Held: held2}, p)
		if err != nil {
			t.Fatal(err)
		}
		if b := next.Score.Terms[0].Value; b != 200000 {
			t.Errorf("%s: the next 2-GPU job gets %v (%s)", p, next.Devices, next.Score)
		}
	}
	// Without best fit (the rule before), the first job splits package 0.
	ch, err := selectBy(m, Request{N: 1, Held: held}, Tree, rules{noLocality: true})
	if err != nil || !slices.Equal(ch.Devices, []int{0}) {
		t.Errorf("the old rule: %v %v, want 0", ch.Devices, err)
	}
}
