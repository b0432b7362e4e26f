package selector

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// sameAsSearch selects req on m through the command's path (Prepared.Select,
// settledNaive first) and through the search alone, fails unless every
// field of the two Choices (and the errors) agree, and says whether
// settledNaive answered.
func sameAsSearch(t *testing.T, name string, m *topology.Model, req Request, p Policy) bool {
	t.Helper()
	req.Alternatives, req.Budget = -1, time.Hour
	_, fast := Prepare(m).settledNaive(req, p)
	got, err := Prepare(m).Select(req, p)
	want, werr := Prepare(m).selectBy(req, p, rules{})
	if fmt.Sprint(err) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %s N=%d exclude %v (settledNaive %v):\n got  %+v %v\n want %+v %v", name, p, req.N, req.Exclude, fast, got, err, want, werr)
	}
	return fast
}

// TestSettledNaiveSameAsSearch runs every benchmark request and every
// real topology at every N under both policies (and again without the
// first device) through the command's path and through the search: the
// Choices are identical, and settledNaive answers the ROCm plugin's
// sizes where the search ends at its root.
func TestSettledNaiveSameAsSearch(t *testing.T) {
	if testing.Short() {
		t.Skip("every benchmark and real selection twice: not in -short")
	}
	answered := map[string]bool{}
	for _, r := range benchmarkRequests(t) {
		if sameAsSearch(t, r.name, r.m, Request{N: r.n}, r.p) {
			answered[fmt.Sprintf("%s/%d", r.name, r.n)] = true
		}
	}
	tops, _ := realTopologies(t)
	for _, top := range tops {
		for _, p := range []Policy{Tree, Ring} {
			for n := 1; n <= len(top.m.Devices); n++ {
				if sameAsSearch(t, top.name, top.m, Request{N: n}, p) {
					answered[fmt.Sprintf("%s/%d", top.name, n)] = true
				}
				sameAsSearch(t, top.name, top.m, Request{N: n - 1, Exclude: []int{0}}, p)
			}
		}
	}
	for _, want := range []string{"kfd topology-parsing-mi308/4", "kfd topology-parsing-mi308/8", "kfd topo-mi300-cpx/8"} {
		if !answered[want] {
			t.Errorf("settledNaive does not answer %s (it answers %v)", want, answered)
		}
	}
	t.Logf("settledNaive answers %d requests: %v", len(answered), answered)
}

// fastModel decodes bytes into a partitioned node of 17 to 64 devices:
// packages of equal partitions (interchangeable unless a byte disturbs
// one link), each package's NUMA node, hive and links to the others
// from the bytes, some devices busy or loaded, measured or not.
func fastModel(t *testing.T, data []byte) (*topology.Model, Request) {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	pk, per := 2+next()%7, 2+next()%8
	n := max(17, pk*per-next()%per)
	pkgOf := func(i int) int { return min(i/per, pk-1) }
	numa, hive := make([]int, pk), make([]int, pk)
	for i := range numa {
		numa[i], hive[i] = next()%2, next()%2
	}
	bws := []int64{0, 25000, 50000, 100000, 200000, 400000}
	between := make([]byte, pk*pk)
	for i := range between {
		between[i] = byte(next())
	}
	odd, oddW, measured := [2]int{next() % n, next() % n}, bws[next()%len(bws)], next()%5 == 0
	m, err := buildModel("fuzz", n, func(i int) int { return numa[pkgOf(i)] }, func(a, b int) (topology.Link, bool) {
		pa, pb := pkgOf(a), pkgOf(b)
		v := between[min(pa, pb)*pk+max(pa, pb)]
		l := topology.Link{Type: topology.LinkXGMI, Direct: true, Measured: measured}
		if v&8 != 0 {
			l.Type, l.Level = topology.LinkPCIe, []string{topology.LevelPIX, topology.LevelPXB, topology.LevelNODE, topology.LevelSYS}[v>>4&3]
		}
		w := bws[int(v&7)%len(bws)]
		if pa == pb {
			w = 400000
		}
		if (a == odd[0] && b == odd[1]) || (a == odd[1] && b == odd[0]) {
			w = oddW
		}
		l.MinBandwidth, l.MaxBandwidth = w, w
		return l, w > 0
	})
	if err != nil {
		return nil, Request{}
	}
	for i := range m.Devices {
		d := &m.Devices[i]
		d.Package = fmt.Sprint("gpu", pkgOf(i))
		if hive[pkgOf(i)] == 1 {
			d.Hive = "h"
		}
		f := next()
		d.Busy = f%11 == 1
		if f%13 == 2 {
			d.UtilPercent = 25
		}
	}
	req := Request{N: next() % (n + 1), AllowBusy: next()%3 == 0}
	if x := next(); x%4 == 0 {
		req.Exclude = []int{x % n}
	}
	return m, req
}

// FuzzSettledNaive compares the command's path with the search on random
// partitioned nodes: settledNaive either declines or gives the search's
// Choice.
func FuzzSettledNaive(f *testing.F) {
	f.Add([]byte{2, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0})
	f.Add([]byte{6, 6, 1, 0, 1, 1, 0, 1, 1, 3, 3, 4, 4, 2, 2, 5, 5, 1, 1, 9, 9, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 8, 1})
	f.Add([]byte{3, 7, 2, 1, 0, 0, 1, 0, 0, 4, 20, 36, 4, 2, 5, 3, 2, 1, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 1, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, req := fastModel(t, data)
		if m == nil {
			return
		}
		for _, p := range []Policy{Tree, Ring} {
			sameAsSearch(t, "fuzz", m, req, p)
		}
	})
}
