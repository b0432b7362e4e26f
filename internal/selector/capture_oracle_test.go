package selector_test

// The oracle of the choice on amd-smi captures lives here, beside the
// selector, because it ranks every set with Policy.Score, which only the
// selector's tests have (export_test.go); it builds its models through
// amdsmi's exported API from the public captures, as Discover does.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/amdsmi"
)

// combos calls f with every k-subset of 0..n-1, ascending.
func combos(n, k int, f func([]int)) {
	c := make([]int, k)
	var rec func(i, start int)
	rec = func(i, start int) {
		if i == k {
			f(c)
			return
		}
		for v := start; v <= n-(k-i); v++ {
			c[i] = v
			rec(i+1, v+1)
		}
	}
	rec(0, 0)
}

// oracle ranks every k-subset of m's devices with p.Score and returns
// the best score and how many sets reach it, with the first of them.
func oracle(m *topology.Model, p selector.Policy, req selector.Request) (selector.Score, []int, int) {
	var best selector.Score
	var first []int
	ties := 0
	combos(m.N(), req.N, func(c []int) {
		s := p.Score(m, req, c)
		switch cmp := s.Compare(best); {
		case first == nil || cmp > 0:
			best, first, ties = s, slices.Clone(c), 1
		case cmp == 0:
			ties++
		}
	})
	return best, first, ties
}

// The dry-run choice on each new amd-smi capture is what a brute force
// over the model picks (issue 24): the same score, and the same set
// where one set alone reaches it. The models are the ones Discover
// builds: the DPX and CPX joins, the topologies without a table, and the
// 4 x MI100 node with a conflicting link type in both row orders.
func TestChoiceOnNewCapturesIsOptimal(t *testing.T) {
	discover := func(files map[string]string) func(t *testing.T) *topology.Model {
		return func(t *testing.T) *topology.Model {
			m, err := amdsmi.Discover(context.Background(), selector.Replay(t, files), nil)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	parsed := func(in func(t *testing.T) string) func(t *testing.T) *topology.Model {
		return func(t *testing.T) *topology.Model {
			top, err := amdsmi.ParseTopology(strings.NewReader(in(t)))
			if err != nil {
				t.Fatal(err)
			}
			m, err := amdsmi.Build(top, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	type node struct {
		name  string
		model func(t *testing.T) *topology.Model
		sizes []int
	}
	nodes := []node{
		{"MI300X DPX (16 partitions)", discover(map[string]string{"amd-smi topology": "amd-smi-topology-mi300x-8gpu-xgmi.txt", "amd-smi": "amd-smi-default-mi300x-dpx-16dev-derived.txt"}), []int{2, 3, 4, 6, 8, 15}},
		{"MI300X CPX (64 partitions)", discover(map[string]string{"amd-smi topology": "amd-smi-topology-mi300x-8gpu-xgmi.txt", "amd-smi": "amd-smi-default-mi300x-cpx-64dev-derived.txt"}), []int{2}},
		{"MI100 XGMI at row 0", parsed(func(*testing.T) string { return mi100(0, 1) }), []int{2, 3}},
		{"MI100 XGMI at row 1", parsed(func(*testing.T) string { return mi100(1, 0) }), []int{2, 3}},
	}
	for _, table := range []string{"access", "weight", "hops", "link-type", "numa-bw"} {
		f := "amd-smi-topology-mi300x-8gpu-no-" + table + "-table-derived.txt"
		nodes = append(nodes, node{f, parsed(func(t *testing.T) string { return string(testutil.ReadFile(t, testutil.Public(t, f))) }), []int{2, 3, 4, 7}})
	}
	if !testing.Short() {
		// 41,664 sets of 3 of 64 at Policy.Score's pace (about 0.3 ms a
		// set of 64 candidates): the brute force is the slow side.
		nodes[1].sizes = append(nodes[1].sizes, 3)
	}
	checked := 0
	for _, nd := range nodes {
		t.Run(nd.name, func(t *testing.T) {
			m := nd.model(t)
			for _, p := range []selector.Policy{selector.Tree, selector.Ring} {
				for _, k := range nd.sizes {
					if p == selector.Ring && (k > 4 || m.N() > 16 && k > 2) {
						continue // the ring's brute force is the slow one
					}
					req := selector.Request{N: k, Budget: time.Hour}
					ch, err := selector.Prepare(m).Select(req, p)
					if err != nil {
						t.Fatal(err)
					}
					best, first, ties := oracle(m, p, req)
					got := p.Score(m, req, ch.Devices)
					name := fmt.Sprintf("%s N=%d", p, k)
					if got.Compare(best) != 0 {
						t.Errorf("%s: chose %v scoring %s; brute force %v scores %s", name, ch.Devices, got, first, best)
					}
					chosen := slices.Sorted(slices.Values(ch.Devices))
					if ties == 1 && !slices.Equal(chosen, first) {
						t.Errorf("%s: chose %v; the one best set is %v", name, chosen, first)
					}
					checked++
				}
			}
		})
	}
	t.Logf("%d choices checked against brute force", checked)
	if checked == 0 {
		t.Fatal("nothing checked")
	}
}

// mi100 is a 4 x MI100 `amd-smi topology` whose pair 0-1 reads XGMI at
// row xr, column xc and PCIE the other way, all weights 72 and hops 3
// (the node of amdsmi's TestLinkTypeConflictMI100BothOrders).
func mi100(xr, xc int) string {
	bdfs := []string{"0000:83:00.0", "0000:a3:00.0", "0000:c3:00.0", "0000:e3:00.0"}
	var b strings.Builder
	for _, tb := range []struct {
		title      string
		self, cell string
	}{{"WEIGHT TABLE", "0", "72"}, {"HOPS TABLE", "0", "3"}, {"LINK TYPE TABLE", "SELF", "PCIE"}} {
		b.WriteString(tb.title + ":\n             " + strings.Join(bdfs, " ") + "\n")
		for r := range bdfs {
			b.WriteString(bdfs[r])
			for c := range bdfs {
				switch {
				case r == c:
					b.WriteString(" " + tb.self)
				case tb.title == "LINK TYPE TABLE" && r == xr && c == xc:
					b.WriteString(" XGMI")
				default:
					b.WriteString(" " + tb.cell)
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
