package rbt

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/amdrun/amdrun/internal/topology"
)

// check refuses a run whose matrices contradict each other or the tool:
// the first broken rule in line order, a *topology.ParseError wrapping
// topology.ErrInconsistent at the cell.
func (r *Result) check() error {
	var bad []inconsistency
	for _, m := range []*Matrix{r.Uni, r.Bi} {
		if m != nil {
			bad = append(bad, r.checkMatrix(m, m == r.Bi)...)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	b := slices.MinFunc(bad, func(x, y inconsistency) int {
		return cmp.Or(cmp.Compare(x.c.line, y.c.line), cmp.Compare(x.c.col, y.c.col))
	})
	return topology.NewParseError(Source, b.c.line, b.c.col, topology.ErrInconsistent, "%s", b.msg)
}

type inconsistency struct {
	c   cell
	msg string
}

func (r *Result) checkMatrix(m *Matrix, bi bool) []inconsistency {
	var bad []inconsistency
	name := func(i int) string { return r.Agents[i].Label }
	for k, c := range m.cells {
		from, to := k[0], k[1]
		a, b := r.Agents[from], r.Agents[to]
		switch {
		case c.na && from != to && a.GPU && b.GPU && r.Access != nil && r.reach(from, to) && r.reach(to, from):
			bad = append(bad, inconsistency{c, fmt.Sprintf("%s: %s to %s is N/A but the access matrix says the two reach each other", m.Title, name(from), name(to))})
		case c.na:
		case from == to && bi:
			bad = append(bad, inconsistency{c, fmt.Sprintf("%s: device %s against itself has a figure; the tool never measures that, so a column is out of place", m.Title, name(from))})
		case !a.GPU && !b.GPU && !r.TransferBench && from != to:
			bad = append(bad, inconsistency{c, fmt.Sprintf("%s: CPU devices %s and %s have a figure; the tool never copies between CPUs, so a column is out of place", m.Title, name(from), name(to))})
		case a.GPU && b.GPU && from != to && r.Access != nil && !r.reach(from, to):
			bad = append(bad, inconsistency{c, fmt.Sprintf("%s: %s to %s has a figure but the access matrix says %s cannot reach %s", m.Title, name(from), name(to), name(from), name(to))})
		}
	}
	if !bi {
		bad = append(bad, r.checkDiagonal(m)...)
	}
	return bad
}

// checkDiagonal checks that a GPU's copy to its own memory exists and
// beats any copy over a link (the tool copies a GPU to itself every run).
func (r *Result) checkDiagonal(m *Matrix) []inconsistency {
	var bad []inconsistency
	for g, a := range r.Agents {
		if !a.GPU || !m.Printed(g, g) {
			continue
		}
		self := m.cells[[2]int{g, g}]
		var best cell
		bestTo := -1 // none found
		for k, c := range m.cells {
			if c.na || k[0] == k[1] || (k[0] != g && k[1] != g) {
				continue
			}
			if bestTo < 0 || c.v > best.v {
				best, bestTo = c, k[0]+k[1]-g
			}
		}
		switch {
		case bestTo < 0:
		case self.na:
			bad = append(bad, inconsistency{self, fmt.Sprintf("%s: GPU %s has no figure to its own memory but has one with %s; a column is out of place", m.Title, a.Label, r.Agents[bestTo].Label)})
		case best.v > self.v:
			bad = append(bad, inconsistency{best, fmt.Sprintf("%s: %.3f GB/s between GPU %s and %s beats the GPU's copy to its own memory (%.3f GB/s); a column is out of place", m.Title, best.v, a.Label, r.Agents[bestTo].Label, self.v)})
		}
	}
	return bad
}

func (r *Result) reach(from, to int) bool {
	v, ok := r.Access.At(from, to)
	return ok && v == 1
}

// P2P says whether GPU agents x and y can copy peer to peer: by the access
// matrix when printed (each must reach the other), else available when a
// copy matrix has a figure for the pair, unavailable when all printed
// cells are N/A, unknown when none is printed (a redacted excerpt).
func (r *Result) P2P(x, y int) topology.P2P {
	if r.Access.Printed(x, y) && r.Access.Printed(y, x) {
		if r.reach(x, y) && r.reach(y, x) {
			return topology.P2PAvailable
		}
		return topology.P2PUnavailable
	}
	printed := false
	for _, m := range []*Matrix{r.Uni, r.Bi} {
		for _, k := range [][2]int{{x, y}, {y, x}} {
			if _, ok := m.At(k[0], k[1]); ok {
				return topology.P2PAvailable
			}
			printed = printed || m.Printed(k[0], k[1])
		}
	}
	if printed {
		return topology.P2PUnavailable
	}
	return topology.P2PUnknown
}
