package amdsmi

import (
	"fmt"

	"github.com/amdrun/amdrun/internal/topology"
)

// fault is the first cell (0-based) of a topology that breaks its shape.
type fault struct {
	table    string
	row, col int
	msg      string
}

// check catches a row or column out of place: topology.CheckCountMatrix
// on WEIGHT and HOPS, and SELF (or N/A) exactly on LINK TYPE's diagonal. An
// asymmetric LINK TYPE is left to topology.ResolveLinkType in Build.
func (t *Topology) check() *fault {
	n, label := len(t.BDFs), t.label
	counts := []struct {
		table, what string
		get         func(p Pair) int
	}{
		{"WEIGHT TABLE", "weight", func(p Pair) int { return p.Weight }},
		{"HOPS TABLE", "hops", func(p Pair) int { return p.Hops }},
	}
	for _, c := range counts {
		f := topology.CheckCountMatrix(n, func(r, col int) (int64, bool) {
			v := c.get(t.Pairs[r][col])
			return int64(v), v >= 0
		})
		if f != nil {
			return &fault{table: c.table, row: f.Row, col: f.Col, msg: f.Describe(label, c.what)}
		}
	}
	for r := 0; r < n; r++ {
		for c := 0; c < n; c++ {
			typ := t.Pairs[r][c].Type
			switch {
			case r == c && typ != "" && typ != "SELF":
				return &fault{table: "LINK TYPE TABLE", row: r, col: c,
					msg: fmt.Sprintf("%s's link to itself is %s, not SELF; a row or column is out of place", label(r), typ)}
			case r != c && typ == "SELF":
				return &fault{table: "LINK TYPE TABLE", row: r, col: c,
					msg: fmt.Sprintf("%s-%s is SELF; a row or column is out of place", label(r), label(c))}
			}
		}
	}
	return nil
}

// label names row i in messages: its PCI address, else "GPU n".
func (t *Topology) label(i int) string {
	if i < len(t.BDFs) && t.BDFs[i] != "" {
		return t.BDFs[i]
	}
	return fmt.Sprintf("GPU %d", t.GPUs[i])
}
