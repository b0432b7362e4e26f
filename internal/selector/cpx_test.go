package selector

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// On the CPX node every N from 1 to 63 is solved exactly by the tree
// policy: whole GPUs first (819200 MB/s inside a GPU), as few GPUs as can
// hold N, GPUs of one NUMA node before the other.
func TestCPXTreeEveryN(t *testing.T) {
	m := newMI300XCPXNode(t)
	for n := 1; n <= 63; n++ {
		start := time.Now()
		ch, err := Select(m, Request{N: n}, Tree)
		if err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		took := time.Since(start)
		if !ch.Exact {
			t.Errorf("N=%d: not exact (gap %.3f on %s)", n, ch.Gap, ch.GapTerm)
		}
		gpus := map[string]bool{}
		for _, d := range ch.Devices {
			gpus[m.Devices[d].Package] = true
		}
		// GPUs 0-6 have 8 partitions and GPU 7 has 7: N <= 7 fits one,
		// and so on up to 8 GPUs for N > 56.
		if want := (n + 7) / 8; len(gpus) != want && !(n == 63 && len(gpus) == 8) {
			t.Errorf("N=%d: %v spans %d GPUs, want %d", n, ch.Devices, len(gpus), want)
		}
		b, _ := ch.Score.Term("bottleneck")
		switch {
		case n == 1:
		case n <= 8 && b.Value != 819200, n > 8 && b.Value != 50000:
			t.Errorf("N=%d: bottleneck %v", n, b.Value)
		}
		if nn, _ := ch.Score.Term("numa"); (n <= 32) != (nn.Natural() == 1) {
			t.Errorf("N=%d: %v NUMA nodes", n, nn.Natural())
		}
		if testing.Verbose() {
			t.Logf("N=%d: %v considered %d in %v", n, ch.Score, ch.Considered, took)
		}
	}
}

// Sets of 8 inside one GPU beat everything; with GPU 0 held the choice
// moves to GPU 1, and the 7-partition GPU is the last resort.
func TestCPXHeldAndAlternatives(t *testing.T) {
	m := newMI300XCPXNode(t)
	held := map[int]string{}
	for i := 0; i < 8; i++ {
		held[i] = "job 1"
	}
	ch, err := Select(m, Request{N: 8, Held: held}, Tree)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Devices, []int{8, 9, 10, 11, 12, 13, 14, 15}) {
		t.Errorf("N=8 with GPU 0 held: %v", ch.Devices)
	}
	// GPUs 2 and 3 are twins of GPU 1 (same NUMA node, same links):
	// their sets score the same and are not listed; GPU 4, on the other
	// NUMA node, is the runner-up, and every other set mixes GPUs.
	if len(ch.Alternatives) != 5 || !slices.Equal(ch.Alternatives[0].Devices, []int{32, 33, 34, 35, 36, 37, 38, 39}) {
		t.Errorf("alternatives %v", ch.Alternatives)
	}
	for _, a := range ch.Alternatives[1:] {
		if b, _ := a.Score.Term("bottleneck"); b.Value != 50000 {
			t.Errorf("alternative %v %s", a.Devices, a.Score)
		}
	}
	ch, err = Select(m, Request{N: 8, Devices: []int{56, 57, 58, 59, 60, 61, 62, 0, 1}}, Tree)
	if err != nil {
		t.Fatal(err)
	}
	// 7 partitions of GPU 7 plus one of GPU 0: bottleneck 50000 anyway, so
	// the total decides: 21 pairs at 819200 beat 1+...
	if !slices.Equal(ch.Devices, []int{0, 56, 57, 58, 59, 60, 61, 62}) {
		t.Errorf("restricted: %v (%s)", ch.Devices, ch.Score)
	}
}

func TestCPXRing(t *testing.T) {
	m := newMI300XCPXNode(t)
	for _, n := range []int{3, 8, 9, 20, 63} {
		// the default work budget; the time cap off so that load cannot cut it
		ch, err := Select(m, Request{N: n, Budget: time.Hour}, Ring)
		if err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		r, _ := ch.Score.Term("ring")
		want := 50000.0
		if n <= 8 {
			want = 819200
		}
		if r.Value != want || !ch.Exact {
			t.Errorf("N=%d: %v ring %v exact %v", n, ch.Devices, ch.Score, ch.Exact)
		}
		if len(ch.Ring) != n || ringBottleneckOf(m.BW, ch.Ring) != int64(want) {
			t.Errorf("N=%d: ring order %v", n, ch.Ring)
		}
	}
}

func ringBottleneckOf(bw func(a, b int) int64, ring []int) int64 {
	b := pathBottleneck(bw, ring)
	return min(b, bw(ring[len(ring)-1], ring[0]))
}

// A node with many distinct devices and a small work budget: the ring
// search stops early, says so and reports a gap to its upper bound.
func TestRingBudget(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	levels := []int64{0, 25000, 50000, 75000, 100000, 150000, 200000}
	bw := make([][]int64, 40)
	for i := range bw {
		bw[i] = make([]int64, 40)
	}
	for a := 0; a < 40; a++ {
		for b := a + 1; b < 40; b++ {
			w := levels[r.IntN(len(levels))] + int64(a+b)
			bw[a][b], bw[b][a] = w, w
		}
	}
	m := newFlatNode(t, 40, func(a, b int) int64 { return bw[a][b] }, func(i int) int { return i % 2 })
	ch, err := Select(m, Request{N: 12, Work: 300, Budget: time.Hour}, Ring)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Exact || ch.CappedBy != CappedByWork || ch.Gap < 0 || ch.Gap >= 1 {
		t.Errorf("exact %v gap %v", ch.Exact, ch.Gap)
	}
	if len(ch.Devices) != 12 || len(ch.Ring) != 12 {
		t.Fatalf("devices %v ring %v", ch.Devices, ch.Ring)
	}
	if s := Ring.Score(m, Request{}, ch.Devices); s.Compare(ch.Score) != 0 {
		t.Errorf("reported %s, rescored %s", ch.Score, s)
	}
}
