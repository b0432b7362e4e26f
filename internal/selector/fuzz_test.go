package selector

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// fuzzModel decodes bytes into a small node: the first byte is the
// device count (1-12), then one byte per pair (its low 3 bits pick a
// bandwidth level, 0 = no direct link), then one byte per device (NUMA
// node, busy flag, load).
func fuzzModel(t *testing.T, data []byte) *topology.Model {
	if len(data) == 0 {
		return nil
	}
	n := 1 + int(data[0])%12
	data = data[1:]
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	levels := []int64{0, 25000, 50000, 50000, 100000, 200000, 200000, 400000}
	bw := make([][]int64, n)
	for i := range bw {
		bw[i] = make([]int64, n)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			w := levels[next()&7]
			bw[a][b], bw[b][a] = w, w
		}
	}
	attr := make([]byte, n)
	for i := range attr {
		attr[i] = next()
	}
	m := newFlatNode(t, n, func(a, b int) int64 { return bw[a][b] }, func(i int) int { return int(attr[i]&3) - 1 })
	for i := range m.Devices {
		if attr[i]&4 != 0 {
			m.Devices[i].Busy, m.Devices[i].BusyReason = true, "fuzz"
		}
		m.Devices[i].UtilPercent = float64(attr[i] >> 4)
	}
	return m
}

// FuzzSelect checks that Select never panics, and that every answer is a
// set of distinct allowed devices whose reported score is its own score.
func FuzzSelect(f *testing.F) {
	f.Add([]byte{7, 5, 2, 4, 0, 0, 0, 3, 0, 2, 0, 1, 0, 0, 0, 0, 0}, uint8(4), true, false)
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 0}, uint8(3), false, true)
	f.Add([]byte{11, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1, 1, 1, 1}, uint8(6), true, true)
	f.Add([]byte{0}, uint8(0), false, false)
	f.Fuzz(func(t *testing.T, data []byte, size uint8, ring, allowBusy bool) {
		m := fuzzModel(t, data)
		if m == nil {
			return
		}
		var p Policy = Tree
		if ring {
			p = Ring
		}
		// the default work budget, the time cap off: exactness must not
		// depend on the machine's load (issue 25)
		req := Request{N: int(size % 14), AllowBusy: allowBusy, Order: Order(size >> 7), Budget: time.Hour}
		ch, err := Select(m, req, p)
		if err != nil {
			var ne *NotEnoughError
			if !errors.As(err, &ne) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		want := req.N
		if want == 0 {
			want = len(ne(m, allowBusy))
		}
		if len(ch.Devices) != want {
			t.Fatalf("%d devices, want %d", len(ch.Devices), want)
		}
		sorted := slices.Clone(ch.Devices)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != want {
			t.Fatalf("duplicate devices %v", ch.Devices)
		}
		for _, d := range ch.Devices {
			if m.Devices[d].Busy && !allowBusy {
				t.Fatalf("busy device %d chosen", d)
			}
		}
		if s := p.Score(m, req, ch.Devices); s.Compare(ch.Score) != 0 {
			t.Fatalf("reported %s, rescored %s", ch.Score, s)
		}
		if !ch.Exact {
			t.Fatalf("not exact with %d devices", len(m.Devices))
		}
		if ring && want >= 3 && ringBottleneckOf(m.BW, ch.Ring) != int64(ch.Score.Terms[0].Value) {
			t.Fatalf("ring %v does not reach %s", ch.Ring, ch.Score)
		}
	})
}

// ne lists the free candidates.
func ne(m *topology.Model, allowBusy bool) []int {
	var out []int
	for i, d := range m.Devices {
		if !d.Busy || allowBusy {
			out = append(out, i)
		}
	}
	return out
}
