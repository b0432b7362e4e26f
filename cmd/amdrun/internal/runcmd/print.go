package runcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// visibleString is the visible-device list of rank 0 ("" for CPU ranks);
// with one list per rank, each rank's own.
func visibleString(r launch.Rank) string {
	env := launch.EnvMap(r.Env)
	if len(r.Devices) == 0 {
		return ""
	}
	if v, ok := env[launch.EnvCUDAVisible]; ok {
		return v
	}
	return env[launch.EnvHIPVisible]
}

// sharedVisible says whether every rank sees the same devices.
func sharedVisible(p *launch.Plan) bool {
	for _, r := range p.Ranks[1:] {
		if visibleString(r) != visibleString(p.Ranks[0]) {
			return false
		}
	}
	return true
}

// rankNUMA names a rank's NUMA nodes: its devices', or those a CPU rank is
// bound to; "-" when unknown.
func rankNUMA(r launch.Rank) []int {
	if len(r.Devices) == 0 {
		return r.NUMANodes
	}
	var nodes []int
	for _, d := range r.Devices {
		if d.NUMANode >= 0 && !slices.Contains(nodes, d.NUMANode) {
			nodes = append(nodes, d.NUMANode)
		}
	}
	slices.Sort(nodes)
	return nodes
}

func printPlan(w io.Writer, m *topology.Model, c *selector.Choice, p *launch.Plan) {
	r0 := launch.EnvMap(p.Ranks[0].Env)
	if c == nil {
		fmt.Fprintf(w, "Topology: none: %d CPU rank(s), no GPU\n", len(p.Ranks))
	} else {
		fmt.Fprintf(w, "Topology: %s: %d devices%s\n", m.Source, m.N(), chosenNUMA(m, c.Devices))
		fmt.Fprintf(w, "Policy:   %s, score %s\n", c.Policy, c.Score.String())
		fmt.Fprintf(w, "Devices:  %s\n", topology.JoinInts(c.Devices))
		if sharedVisible(p) {
			fmt.Fprintf(w, "Visible:  CUDA_VISIBLE_DEVICES=%s HIP_VISIBLE_DEVICES=%s\n", r0[launch.EnvCUDAVisible], r0[launch.EnvHIPVisible])
		} else {
			lists := make([]string, len(p.Ranks))
			for i, r := range p.Ranks {
				lists[i] = visibleString(r)
			}
			fmt.Fprintf(w, "Visible:  each rank its own devices (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES): %s\n", strings.Join(lists, " | "))
		}
	}
	fmt.Fprintf(w, "Master:   %s:%s (world size %d)\n\n", r0["MASTER_ADDR"], r0["MASTER_PORT"], p.WorldSize)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tLOCAL\tDEVICE\tNUMA\tCPUS\tCOMMAND")
	for _, r := range p.Ranks {
		numa := topology.JoinInts(rankNUMA(r))
		if numa == "" {
			numa = "-"
		}
		cpus := topology.FormatCPUList(r.CPUs)
		if cpus == "" {
			cpus = "(not bound)"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", r.Rank, r.LocalRank, r.DeviceLabel(), numa, cpus, quoteArgv(r.Argv))
	}
	tw.Flush()
}

// chosenNUMA says which NUMA nodes the chosen devices sit on. It is the
// devices' own nodes, not the count of this host's nodes: planning from
// a saved topology, or in a container that sees one node, the two differ.
func chosenNUMA(m *topology.Model, devices []int) string {
	var nodes []int
	unknown := 0
	seen := map[int]bool{}
	for _, d := range devices {
		n := m.Devices[d].NUMANode
		switch {
		case n < 0:
			unknown++
		case !seen[n]:
			seen[n] = true
			nodes = append(nodes, n)
		}
	}
	s := ""
	switch len(nodes) {
	case 0:
	case 1:
		s = fmt.Sprintf("; chosen devices on NUMA node %d", nodes[0])
	default:
		s = fmt.Sprintf("; chosen devices on %d NUMA nodes (%s)", len(nodes), topology.FormatCPUList(nodes))
	}
	if unknown > 0 {
		s += fmt.Sprintf("; NUMA node unknown for %d", unknown)
	}
	return s
}

// quoteArgv shows argv for people; it is never run by a shell.
func quoteArgv(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`|&;<>()*?[]{}~#") {
			out[i] = fmt.Sprintf("%q", a)
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

func printExplain(w io.Writer, m *topology.Model, c *selector.Choice) {
	fmt.Fprintf(w, "\nWhy %s (policy %s, bandwidth %s", topology.JoinInts(c.Devices), c.Policy, m.Bandwidth)
	if c.Exact {
		fmt.Fprintf(w, ", exact search, %d sets examined", c.Considered)
	} else {
		fmt.Fprintf(w, ", best found within %s, not proven: %s", cappedFlag(c), gapString(c))
	}
	fmt.Fprintln(w, "):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  \tSET\tSCORE")
	fmt.Fprintf(tw, "  chosen\t%s\t%s\n", topology.JoinInts(c.Devices), c.Score.String())
	for i, a := range c.Alternatives {
		fmt.Fprintf(tw, "  #%d\t%s\t%s\n", i+2, topology.JoinInts(a.Devices), a.Score.String())
	}
	if c.Naive != nil {
		fmt.Fprintf(tw, "  naive (first free)\t%s\t%s\n", topology.JoinInts(c.Naive.Devices), c.Naive.Score.String())
	}
	tw.Flush()
	if len(c.Ring) > 0 {
		fmt.Fprintf(w, "  ring: %s\n", ringString(m, c.Ring))
	}
	// Say what decided: a tie with the runner-up, then the first term that
	// sets the chosen set ahead of the best set that scores differently.
	for i, a := range c.Alternatives {
		line := decidedBy(c.Score, a)
		if c.Score.Compare(a.Score) != 0 || i == 0 {
			fmt.Fprintf(w, "  %s\n", line)
		}
		if c.Score.Compare(a.Score) != 0 {
			break
		}
	}
	if c.Naive != nil && len(c.Naive.Score.Terms) > 0 && len(c.Score.Terms) > 0 && c.Naive.Score.Terms[0].Value > 0 {
		t := c.Score.Terms[0]
		ratio := t.Value / c.Naive.Score.Terms[0].Value
		fmt.Fprintf(w, "  %s: chosen %g %s vs naive %g %s (%.2fx)\n", t.Name, t.Value, t.Unit,
			c.Naive.Score.Terms[0].Value, t.Unit, ratio)
	}
}

// gapString says how far from proven an inexact choice is: "total within
// 3.2% of its upper bound 1234000 MB/s".
func gapString(c *selector.Choice) string {
	g := jsonGapOf(c)
	if g == nil {
		return "no bound"
	}
	return fmt.Sprintf("%s within %.1f%% of its upper bound %g %s", g.Term, 100*g.Relative, g.Bound, g.Unit)
}

func ringString(m *topology.Model, ring []int) string {
	var b strings.Builder
	for i, d := range ring {
		next := ring[(i+1)%len(ring)]
		l := m.Link(d, next)
		fmt.Fprintf(&b, "%d", d)
		if l != nil {
			kind := string(l.Type)
			if !l.Direct {
				kind = "host " + kind
			}
			fmt.Fprintf(&b, " -[%s %g GB/s]- ", kind, float64(l.MaxBandwidth)/1000)
		}
	}
	fmt.Fprintf(&b, "%d", ring[0])
	return b.String()
}

type jsonRank struct {
	Rank      int `json:"rank"`
	LocalRank int `json:"local_rank"`
	// Device is the rank's first device, -1 for a CPU rank; Devices all
	// of them ([] for a CPU rank).
	Device  int   `json:"device"`
	Devices []int `json:"devices"`
	// NUMANode is the first of the rank's devices' NUMA nodes (a CPU
	// rank's: the one it is bound to), -1 if none.
	NUMANode int               `json:"numa_node"`
	CPUs     []int             `json:"cpus"`
	Mems     []int             `json:"mems,omitempty"`
	Argv     []string          `json:"argv"`
	Env      map[string]string `json:"env"`
}

type jsonCandidate struct {
	Devices []int      `json:"devices"`
	Score   []jsonTerm `json:"score"`
}

// jsonTerm is a score term as people read it (selector stores terms where
// smaller is better negated).
type jsonTerm struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
}

func jsonTerms(s selector.Score) []jsonTerm {
	out := make([]jsonTerm, len(s.Terms))
	for i, t := range s.Terms {
		v := t.Natural()
		if v == 0 {
			v = 0 // not -0, the negation of a smaller-is-better 0
		}
		out[i] = jsonTerm{t.Name, v, t.Unit}
	}
	return out
}

type jsonPlan struct {
	Source    string `json:"source"`
	Policy    string `json:"policy"`
	Bandwidth string `json:"bandwidth"`
	// CPU says the ranks have no device (no GPU found, or --ngpus 0).
	CPU     bool  `json:"cpu,omitempty"`
	Devices []int `json:"devices"`
	// VisibleDevices is rank 0's list; each rank's env has its own.
	VisibleDevices string          `json:"visible_devices"`
	Score          []jsonTerm      `json:"score"`
	Exact          bool            `json:"exact"`
	Gap            *jsonGap        `json:"gap,omitempty"`
	Ring           []int           `json:"ring,omitempty"`
	Alternatives   []jsonCandidate `json:"alternatives,omitempty"`
	Naive          *jsonCandidate  `json:"naive,omitempty"`
	WorldSize      int             `json:"world_size"`
	Ranks          []jsonRank      `json:"ranks"`
	Warnings       []string        `json:"warnings,omitempty"`
}

// jsonGap is the proven gap of an inexact choice: the first score term a
// set the search left unsettled might beat, the most it could reach
// there, and the chosen set's relative shortfall from that.
type jsonGap struct {
	Term     string  `json:"term"`
	Bound    float64 `json:"bound"`
	Unit     string  `json:"unit,omitempty"`
	Relative float64 `json:"relative"`
	// CappedBy is what stopped the search: "work" (--search-work),
	// "time" (--search-budget) or absent (a ring's cycle search).
	CappedBy string `json:"capped_by,omitempty"`
}

func jsonGapOf(c *selector.Choice) *jsonGap {
	if c.Exact || c.GapTerm == "" {
		return nil
	}
	t, _ := c.Score.Term(c.GapTerm)
	return &jsonGap{Term: c.GapTerm, Bound: c.Bound, Unit: t.Unit, Relative: c.Gap, CappedBy: c.CappedBy}
}

// cappedFlag names what stopped an unproven search: the work budget,
// the time cap (then the answer depends on the machine's load), or the
// ring's own cycle search.
func cappedFlag(c *selector.Choice) string {
	switch c.CappedBy {
	case selector.CappedByWork:
		return "--search-work"
	case selector.CappedByTime:
		return "the --search-budget time cap (the answer depends on the machine's load)"
	}
	return "the ring search's step cap"
}

func printJSON(o *Options, m *topology.Model, c *selector.Choice, p *launch.Plan) error {
	out := jsonPlan{
		Devices: []int{}, Score: []jsonTerm{}, VisibleDevices: visibleString(p.Ranks[0]),
		WorldSize: p.WorldSize, Warnings: p.Warnings, CPU: c == nil, Source: "none",
	}
	if c != nil {
		out.Source, out.Policy, out.Bandwidth = m.Source, c.Policy, m.Bandwidth
		out.Devices, out.Score, out.Exact, out.Ring = c.Devices, jsonTerms(c.Score), c.Exact, c.Ring
		out.Gap = jsonGapOf(c)
		for _, a := range c.Alternatives {
			out.Alternatives = append(out.Alternatives, jsonCandidate{a.Devices, jsonTerms(a.Score)})
		}
		if c.Naive != nil {
			out.Naive = &jsonCandidate{c.Naive.Devices, jsonTerms(c.Naive.Score)}
		}
	}
	for _, r := range p.Ranks {
		env := launch.EnvMap(r.Env)
		shown := map[string]string{}
		for _, k := range launch.RankVars {
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
		out.Ranks = append(out.Ranks, jsonRank{r.Rank, r.LocalRank, r.Device.Index, devs, numa, cpus, r.Mems, r.Argv, shown})
	}
	enc := json.NewEncoder(o.IO.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// decidedBy says which score term put the chosen set ahead of the runner-up:
// "links tie with 0,1,2,4 (bottleneck, total); decided by numa: 1 vs 2".
func decidedBy(chosen selector.Score, alt selector.Candidate) string {
	var equal []string
	for i, t := range chosen.Terms {
		if i >= len(alt.Score.Terms) {
			break
		}
		a := alt.Score.Terms[i]
		if t.Value == a.Value {
			equal = append(equal, t.Name)
			continue
		}
		prefix := "ahead of " + topology.JoinInts(alt.Devices)
		if len(equal) > 0 {
			prefix = fmt.Sprintf("equal to %s on %s", topology.JoinInts(alt.Devices), strings.Join(equal, ", "))
		}
		return fmt.Sprintf("%s; decided by %s: %g vs %g %s", prefix, t.Name, t.Natural(), a.Natural(), t.Unit)
	}
	return fmt.Sprintf("ties with %s on every term; the lowest device indices win", topology.JoinInts(alt.Devices))
}
