package selector

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/kfd"
)

var choicesOut = flag.String("choices-out", "", "write every benchmark topology's choices to this file (bench/same-answer.sh)")

// benchmarkRequests are the selections the benchmarks of bench_test.go
// make: every topology, policy and N they time.
func benchmarkRequests(t testing.TB) []struct {
	name string
	m    *topology.Model
	p    Policy
	n    int
} {
	type request = struct {
		name string
		m    *topology.Model
		p    Policy
		n    int
	}
	var reqs []request
	add := func(name string, m *topology.Model, pols []Policy, ns ...int) {
		for _, p := range pols {
			for _, n := range ns {
				reqs = append(reqs, request{name, m, p, n})
			}
		}
	}
	both, tree := []Policy{Tree, Ring}, []Policy{Tree}
	every := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i + 1
		}
		return out
	}
	add("mi250", newMI250Node(t), both, every(8)...)
	add("cpx", newMI300XCPXNode(t), tree, every(63)...)
	for _, parts := range []int{63, 64} {
		add(fmt.Sprintf("noisy cpx %d", parts), newMI300XCPXNodeOf(t, parts, 0.03, 7), both, every(parts)...)
	}
	add("tiered cpx 63", tieredCPX(t), both, every(63)...)
	d := newDGX16Node(t)
	add("16 devices", newFlatNode(t, 16, func(x, y int) int64 { return d.bw[x][y] }, func(i int) int { return i / 8 }), both, 4, 8)
	add("distinct 64", newDistinctNode(t, 64, 11), []Policy{Ring}, 48, 54)
	add("distinct 128", newDistinctNode(t, 128, 11), both, 8, 64)
	add("distinct 256", newDistinctNode(t, 256, 11), both, 8, 128)
	for _, tc := range []struct {
		tree  string
		sizes []int
	}{{"topology-parsing-mi308", []int{4, 8, 16}}, {"topo-mi300-cpx", []int{8, 56, 62}}, {"topo-mi210-xgmi-pcie", []int{2, 4}}} {
		m, err := kfd.Read(kfd.DirFS(testutil.KFD(t, tc.tree)), nil)
		if err != nil {
			t.Fatal(err)
		}
		add("kfd "+tc.tree, m, tree, tc.sizes...)
	}
	return reqs
}

// TestWriteChoices writes, with -choices-out, one line per benchmark
// selection: what a user sees of the answer (devices, ring, score,
// exactness, gap, work, runner-ups). bench/same-answer.sh runs it idle
// and beside busy loops on every CPU and compares the files; without the
// flag it only checks that every selection answers.
func TestWriteChoices(t *testing.T) {
	if testing.Short() && *choicesOut == "" {
		t.Skip("every benchmark selection: not in -short")
	}
	w := bufio.NewWriter(io.Discard)
	if *choicesOut != "" {
		f, err := os.Create(*choicesOut)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}()
		w = bufio.NewWriter(f)
	}
	for _, r := range benchmarkRequests(t) {
		// the time cap off: the work budget alone bounds the search
		ch, err := Select(r.m, Request{N: r.n, Budget: time.Hour}, r.p)
		if err != nil {
			t.Fatalf("%s %s N=%d: %v", r.name, r.p, r.n, err)
		}
		fmt.Fprintf(w, "%s %s N=%d: %v ring %v; %s; exact %v gap %.6f %s capped %q work %d;", r.name, r.p, r.n,
			ch.Devices, ch.Ring, ch.Score, ch.Exact, ch.Gap, ch.GapTerm, ch.CappedBy, ch.Work)
		for _, a := range ch.Alternatives {
			fmt.Fprintf(w, " %v", a.Devices)
		}
		fmt.Fprintln(w)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// Issue 35: the choice never depends on whether runner-ups are asked:
// every benchmark selection gives the same set, ring, score, proof and
// work with none and with the default five, none of which is the set.
func TestChoiceIndependentOfRunnerUps(t *testing.T) {
	if testing.Short() {
		t.Skip("every benchmark selection twice: not in -short")
	}
	for _, r := range benchmarkRequests(t) {
		one, err := Select(r.m, Request{N: r.n, Budget: time.Hour, Alternatives: -1}, r.p)
		if err != nil {
			t.Fatal(err)
		}
		five, err := Select(r.m, Request{N: r.n, Budget: time.Hour}, r.p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(one.Devices, five.Devices) || !slices.Equal(one.Ring, five.Ring) || one.Score.Compare(five.Score) != 0 ||
			one.Exact != five.Exact || one.Gap != five.Gap || one.Work != five.Work || len(one.Alternatives) != 0 {
			t.Errorf("%s %s N=%d: alone %v %s (exact %v, work %d); with runner-ups %v %s (exact %v, work %d)", r.name, r.p, r.n,
				one.Devices, one.Score, one.Exact, one.Work, five.Devices, five.Score, five.Exact, five.Work)
		}
		for _, a := range five.Alternatives {
			if slices.Equal(a.Devices, slices.Sorted(slices.Values(five.Devices))) {
				t.Errorf("%s %s N=%d: the chosen set %v is listed as a runner-up", r.name, r.p, r.n, a.Devices)
			}
		}
	}
}
