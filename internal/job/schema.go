package job

import (
	"encoding/json"
	"io"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
)

// Document is the plan as `amdrun --dry-run --json` prints it, a contract
// (docs/usage.md "The dry-run JSON"): fields are only ever added.
type Document struct {
	// Source names where the topology came from; "none" for CPU ranks.
	Source string `json:"source"`
	// Policy is the selection policy, "tree" or "ring"; "" for CPU ranks.
	Policy string `json:"policy"`
	// Bandwidth is "theoretical" or "measured"; "" for CPU ranks.
	Bandwidth string `json:"bandwidth"`
	// CPU says the ranks have no device (no GPU found, or --ngpus 0).
	CPU bool `json:"cpu,omitempty"`
	// Devices are the chosen devices in rank order; [] for CPU ranks.
	Devices []int `json:"devices"`
	// VisibleDevices is rank 0's visible-device list; "" for CPU ranks.
	VisibleDevices string `json:"visible_devices"`
	// Score is the chosen set's score, most significant term first.
	Score []Term `json:"score"`
	// Exact says no set scores better; else Gap says how far from proven.
	Exact bool  `json:"exact"`
	Gap   *Gap  `json:"gap,omitempty"`
	Ring  []int `json:"ring,omitempty"`
	// Alternatives are the next best sets; Naive the first N free devices.
	Alternatives []Candidate `json:"alternatives,omitempty"`
	Naive        *Candidate  `json:"naive,omitempty"`
	// WorldSize is the number of ranks of the whole job (every node).
	WorldSize int `json:"world_size"`
	// Ranks are this node's ranks, by local rank.
	Ranks []Rank `json:"ranks"`
	// Warnings are the plan's warnings (also on stderr).
	Warnings []string `json:"warnings,omitempty"`
}

// Rank is one rank of a Document.
type Rank struct {
	Rank      int `json:"rank"`
	LocalRank int `json:"local_rank"`
	// Device is the rank's first device and Devices all; -1 and [] for a
	// CPU rank.
	Device  int   `json:"device"`
	Devices []int `json:"devices"`
	// NUMANode is the rank's first NUMA node, -1 if none.
	NUMANode int `json:"numa_node"`
	// CPUs are the rank's CPUs ([]: not bound); Mems its memory nodes.
	CPUs []int `json:"cpus"`
	Mems []int `json:"mems,omitempty"`
	// Argv is the command the rank runs (never through a shell).
	Argv []string `json:"argv"`
	// Env holds the variables amdrun sets for the rank (plan.RankVars).
	Env map[string]string `json:"env"`
}

// Candidate is a set of devices with its score.
type Candidate struct {
	Devices []int  `json:"devices"`
	Score   []Term `json:"score"`
}

// Term is a score term as people read it, in its own unit (not negated
// as the selector stores smaller-is-better ones).
type Term struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
}

// Gap is the proven gap of an inexact choice: the first term an
// unsettled set might beat, its bound and the relative shortfall.
type Gap struct {
	Term     string  `json:"term"`
	Bound    float64 `json:"bound"`
	Unit     string  `json:"unit,omitempty"`
	Relative float64 `json:"relative"`
	// CappedBy is what stopped the search: "work" (--search-work),
	// "time" (--search-budget) or absent (a ring's cycle search).
	CappedBy string `json:"capped_by,omitempty"`
}

func terms(s selector.Score) []Term {
	out := make([]Term, len(s.Terms))
	for i, t := range s.Terms {
		v := t.Natural()
		if v == 0 {
			v = 0 // not -0, the negation of a smaller-is-better 0
		}
		out[i] = Term{t.Name, v, t.Unit}
	}
	return out
}

func gapOf(c *selector.Choice) *Gap {
	if c.Exact || c.GapTerm == "" {
		return nil
	}
	t, _ := c.Score.Term(c.GapTerm)
	return &Gap{Term: c.GapTerm, Bound: c.Bound, Unit: t.Unit, Relative: c.Gap, CappedBy: c.CappedBy}
}

// Document returns the plan's JSON form.
func (pl *Plan) Document() Document {
	m, c, p := pl.Model, pl.Choice, pl.Ranks
	out := Document{
		Devices: []int{}, Score: []Term{}, VisibleDevices: visibleString(p.Ranks[0]),
		WorldSize: p.WorldSize, Warnings: p.Warnings, CPU: c == nil, Source: "none",
	}
	if c != nil {
		out.Source, out.Policy, out.Bandwidth = m.Source, c.Policy, m.Bandwidth
		out.Devices, out.Score, out.Exact, out.Ring, out.Gap = c.Devices, terms(c.Score), c.Exact, c.Ring, gapOf(c)
		for _, a := range c.Alternatives {
			out.Alternatives = append(out.Alternatives, Candidate{a.Devices, terms(a.Score)})
		}
		if c.Naive != nil {
			out.Naive = &Candidate{c.Naive.Devices, terms(c.Naive.Score)}
		}
	}
	for _, r := range p.Ranks {
		out.Ranks = append(out.Ranks, rankDoc(r))
	}
	return out
}

func rankDoc(r plan.Rank) Rank {
	env := envlist.Map(r.Env)
	shown := map[string]string{}
	for _, k := range plan.RankVars {
		if v, ok := env[k]; ok {
			shown[k] = v
		}
	}
	numa := -1
	if nodes := rankNUMA(r); len(nodes) > 0 {
		numa = nodes[0]
	}
	return Rank{r.Rank, r.LocalRank, r.Device.Index, plan.Indices(r.Devices), numa, append([]int{}, r.CPUs...), r.Mems, r.Argv, shown}
}

// WriteJSON writes Document, indented, after the torchrun command line
// with torchrun.
func (pl *Plan) WriteJSON(w io.Writer) error {
	pl.writeLauncher(w)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(pl.Document())
}
