package job

import (
	"encoding/json"
	"io"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
)

// Document is the plan as `amdrun --dry-run --json` prints it: one JSON
// object, a contract that scripts read (docs/usage.md "The dry-run JSON"
// describes it; testdata/dryrun holds goldens of it). Fields are only
// ever added: none is renamed, retyped or dropped.
type Document struct {
	// Source names where the topology came from ("sysfs", "amd-smi",
	// "file node.json", "example (seed MI250 node)", ...); "none" for CPU
	// ranks.
	Source string `json:"source"`
	// Policy is the selection policy, "tree" or "ring"; "" for CPU ranks.
	Policy string `json:"policy"`
	// Bandwidth is "theoretical" or "measured" (an amdrun bench result
	// was applied); "" for CPU ranks.
	Bandwidth string `json:"bandwidth"`
	// CPU says the ranks have no device (no GPU found, or --ngpus 0).
	CPU bool `json:"cpu,omitempty"`
	// Devices are the chosen device indices in rank order; [] for CPU
	// ranks.
	Devices []int `json:"devices"`
	// VisibleDevices is rank 0's visible-device list (each rank's env has
	// its own when ranks see different devices); "" for CPU ranks.
	VisibleDevices string `json:"visible_devices"`
	// Score is the chosen set's score, most significant term first.
	Score []Term `json:"score"`
	// Exact says the search proved no set scores better; when false, Gap
	// says how far from proven the choice is.
	Exact bool  `json:"exact"`
	Gap   *Gap  `json:"gap,omitempty"`
	Ring  []int `json:"ring,omitempty"`
	// Alternatives are the next best sets, best first; Naive is the first
	// N free devices, the pick amdrun improves on.
	Alternatives []Candidate `json:"alternatives,omitempty"`
	Naive        *Candidate  `json:"naive,omitempty"`
	// WorldSize is the number of ranks of the whole job (every node).
	WorldSize int `json:"world_size"`
	// Ranks are this node's ranks, by local rank.
	Ranks []Rank `json:"ranks"`
	// Warnings are the plan's warnings (also printed on stderr).
	Warnings []string `json:"warnings,omitempty"`
}

// Rank is one rank of a Document.
type Rank struct {
	Rank      int `json:"rank"`
	LocalRank int `json:"local_rank"`
	// Device is the rank's first device, -1 for a CPU rank; Devices all
	// of them ([] for a CPU rank).
	Device  int   `json:"device"`
	Devices []int `json:"devices"`
	// NUMANode is the first of the rank's devices' NUMA nodes (a CPU
	// rank's: the one it is bound to), -1 if none.
	NUMANode int `json:"numa_node"`
	// CPUs are the CPUs the rank is bound to, [] when not bound; Mems its
	// memory nodes when bound.
	CPUs []int `json:"cpus"`
	Mems []int `json:"mems,omitempty"`
	// Argv is the command the rank runs (never through a shell).
	Argv []string `json:"argv"`
	// Env holds the variables amdrun sets for the rank (plan.RankVars:
	// RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, the visible devices,
	// ...), not the environment it passes through.
	Env map[string]string `json:"env"`
}

// Candidate is a set of devices with its score.
type Candidate struct {
	Devices []int  `json:"devices"`
	Score   []Term `json:"score"`
}

// Term is a score term as people read it: larger is better for some
// terms (bandwidth), smaller for others (numa, busy), each in its own
// unit. (The selector stores the smaller-is-better ones negated.)
type Term struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
}

// Gap is the proven gap of an inexact choice: the first score term a set
// the search left unsettled might beat, the most it could reach there,
// and the chosen set's relative shortfall from that.
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
		out.Devices, out.Score, out.Exact, out.Ring = c.Devices, terms(c.Score), c.Exact, c.Ring
		out.Gap = gapOf(c)
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
	cpus := r.CPUs
	if cpus == nil {
		cpus = []int{}
	}
	devs := []int{}
	for _, d := range r.Devices {
		devs = append(devs, d.Index)
	}
	numa := -1
	if nodes := rankNUMA(r); len(nodes) > 0 {
		numa = nodes[0]
	}
	return Rank{r.Rank, r.LocalRank, r.Device.Index, devs, numa, cpus, r.Mems, r.Argv, shown}
}

// WriteJSON writes Document, indented, with a newline. With torchrun the
// torchrun command line comes first, on a line of its own, as amdrun has
// always printed it.
func (pl *Plan) WriteJSON(w io.Writer) error {
	pl.writeLauncher(w)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(pl.Document())
}
