package amdsmi

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
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
			var calls []string
			m, err := Discover(context.Background(), fakeRun(t, files, &calls), nil)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	parsed := func(in func(t *testing.T) []byte) func(t *testing.T) *topology.Model {
		return func(t *testing.T) *topology.Model {
			top, err := ParseTopology(bytes.NewReader(in(t)))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Build(top, nil, nil)
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
		{"MI300X DPX (16 partitions)", discover(map[string]string{"amd-smi topology": "public:amd-smi-topology-mi300x-8gpu-xgmi.txt", "amd-smi": "public:amd-smi-default-mi300x-dpx-16dev-derived.txt"}), []int{2, 3, 4, 6, 8, 15}},
		{"MI300X CPX (64 partitions)", discover(map[string]string{"amd-smi topology": "public:amd-smi-topology-mi300x-8gpu-xgmi.txt", "amd-smi": "public:amd-smi-default-mi300x-cpx-64dev-derived.txt"}), []int{2}},
		{"MI100 XGMI at row 0", parsed(func(*testing.T) []byte { return []byte(mi100(0, 1)) }), []int{2, 3}},
		{"MI100 XGMI at row 1", parsed(func(*testing.T) []byte { return []byte(mi100(1, 0)) }), []int{2, 3}},
	}
	for _, table := range []string{"access", "weight", "hops", "link-type", "numa-bw"} {
		f := "amd-smi-topology-mi300x-8gpu-no-" + table + "-table-derived.txt"
		nodes = append(nodes, node{f, parsed(func(t *testing.T) []byte { return public(t, f) }), []int{2, 3, 4, 7}})
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
					ch, err := selector.Select(m, req, p)
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
