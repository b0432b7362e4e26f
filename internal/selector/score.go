package selector

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Score is a set's rank: its terms compare lexicographically, first term
// first, and for every term a bigger Value is better. Terms where smaller
// is better (NUMA nodes, load) are stored negated and printed naturally.
type Score struct {
	Terms []Term
}

// Term is one component of a Score, e.g. {"bottleneck", 100000, "MB/s"}.
type Term struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// Less says smaller is better for this term: Value holds the
	// negated figure and String prints -Value.
	Less bool `json:"less,omitempty"`
}

// Natural returns the figure as people read it (un-negated).
func (t Term) Natural() float64 {
	if t.Less {
		return -t.Value
	}
	return t.Value
}

// String prints "bottleneck 100000 MB/s".
func (t Term) String() string {
	v := t.Natural()
	num := fmt.Sprintf("%.2f", v)
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		num = fmt.Sprintf("%d", int64(v))
	}
	return strings.TrimSpace(t.Name + " " + num + " " + t.Unit)
}

// String prints the terms, "bottleneck 100000 MB/s, total 596000 MB/s, ...".
func (s Score) String() string {
	parts := make([]string, len(s.Terms))
	for i, t := range s.Terms {
		parts[i] = t.String()
	}
	return strings.Join(parts, ", ")
}

// Compare returns +1 when s ranks above o, -1 when below and 0 when they
// tie; on a common prefix the longer one wins.
func (s Score) Compare(o Score) int {
	for i := 0; i < len(s.Terms) && i < len(o.Terms); i++ {
		if c := cmp.Compare(s.Terms[i].Value, o.Terms[i].Value); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(s.Terms), len(o.Terms))
}

// Term returns the term called name and whether it exists.
func (s Score) Term(name string) (Term, bool) {
	for _, t := range s.Terms {
		if t.Name == name {
			return t, true
		}
	}
	return Term{}, false
}

// key is a Score in integer form, bigger better; a slot a policy does
// not rank by stays 0.
type key [keyLen]int64

// Slots of a key, in ranking order.
const (
	kFirst    = iota // tree: bottleneck of the widest spanning tree; ring: of the best ring
	kCut             // ring: global min cut; tree: 0
	kTotal           // total pairwise bandwidth
	kLocality        // summed locality rank of every pair (topology.Locality)
	// the tie-breaks from kTies on (terms.go)
	keyLen = kTies + nTies
)

func (a key) cmp(b key) int { return slices.Compare(a[:], b[:]) }

// slotTerm is one slot of a key shown as a Term.
type slotTerm struct {
	slot int
	name string
	unit string
	less bool
}

// score turns a key into a Score: the policy's pair terms, then the
// tie-breaks.
func (p *problem) score(k key) Score {
	pair := p.policy.rules().pairs
	t := make([]Term, 0, len(pair)+len(p.ties))
	if p.size >= 2 {
		for _, st := range pair {
			t = append(t, Term{Name: st.name, Value: float64(k[st.slot]), Unit: st.unit, Less: st.less})
		}
	}
	for i, tt := range p.ties {
		v := float64(k[kTies+i])
		if tt.div > 1 {
			v /= float64(tt.div)
		}
		t = append(t, Term{Name: tt.name, Value: v, Unit: tt.unit, Less: tt.less})
	}
	return Score{Terms: t}
}
