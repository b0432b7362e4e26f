package job

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// visibleString is rank r's visible-device list ("" for a CPU rank).
func visibleString(r plan.Rank) string {
	if len(r.Devices) == 0 {
		return ""
	}
	return envlist.Get(r.Env, plan.EnvCUDAVisible)
}

// rankNUMA is a rank's NUMA nodes: its devices', or a CPU rank's.
func rankNUMA(r plan.Rank) []int {
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

// WriteText writes the plan for people: the launcher and interpreter,
// the topology, policy, devices and visible lists, a table of ranks,
// and with explain, WriteExplain.
func (pl *Plan) WriteText(w io.Writer, explain bool) {
	pl.writeLauncher(w)
	pl.writePython(w)
	pl.writeRanks(w)
	if explain && pl.Choice != nil {
		pl.WriteExplain(w)
	}
}

// writeLauncher names the torchrun command that starts the ranks.
func (pl *Plan) writeLauncher(w io.Writer) {
	if pl.Torchrun {
		fmt.Fprintf(w, "Launcher: %s\n", quoteArgv(pl.Run.Ranks[0].Argv))
	}
}

// writePython names the ranks' interpreter and its torch (issue 22).
func (pl *Plan) writePython(w io.Writer) {
	if pl.Python == "" {
		return
	}
	torch := "torch " + pl.TorchVersion
	if pl.TorchVersion == "" {
		torch = "no torch found"
	}
	from := ""
	if pl.PythonFrom != "" {
		from = " (" + pl.PythonFrom + ")"
	}
	fmt.Fprintf(w, "Python:   %s%s: %s\n", pl.Python, from, torch)
}

func (pl *Plan) writeRanks(w io.Writer) {
	m, c, p := pl.Model, pl.Choice, pl.Ranks
	r0 := envlist.Map(p.Ranks[0].Env)
	if c == nil {
		fmt.Fprintf(w, "Topology: none: %d CPU rank(s), no GPU\n", len(p.Ranks))
	} else {
		fmt.Fprintf(w, "Topology: %s: %d devices%s\n", m.Source, m.N(), chosenNUMA(m, c.Devices))
		fmt.Fprintf(w, "Policy:   %s, score %s\n", c.Policy, c.Score.String())
		fmt.Fprintf(w, "Devices:  %s\n", topology.JoinInts(c.Devices))
		lists := make([]string, len(p.Ranks))
		for i, r := range p.Ranks {
			lists[i] = visibleString(r)
		}
		if len(slices.Compact(slices.Clone(lists))) == 1 { // every rank sees the same devices
			fmt.Fprintf(w, "Visible:  CUDA_VISIBLE_DEVICES=%s HIP_VISIBLE_DEVICES=%s\n", r0[plan.EnvCUDAVisible], r0[plan.EnvHIPVisible])
		} else {
			fmt.Fprintf(w, "Visible:  each rank its own devices (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES): %s\n", strings.Join(lists, " | "))
		}
	}
	fmt.Fprintf(w, "Master:   %s:%s (world size %d)\n\n", r0["MASTER_ADDR"], r0["MASTER_PORT"], p.WorldSize)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tLOCAL\tDEVICE\tNUMA\tCPUS\tCOMMAND")
	for _, r := range p.Ranks {
		numa, cpus := cmp.Or(topology.JoinInts(rankNUMA(r)), "-"), cmp.Or(topology.FormatCPUList(r.CPUs), "(not bound)")
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", r.Rank, r.LocalRank, r.DeviceLabel(), numa, cpus, quoteArgv(r.Argv))
	}
	tw.Flush()
}

// chosenNUMA says which NUMA nodes the chosen devices sit on (not this
// host's: a saved topology or a container may differ).
func chosenNUMA(m *topology.Model, devices []int) string {
	unknown, seen := 0, map[int]bool{}
	for _, d := range devices {
		if n := m.Devices[d].NUMANode; n < 0 {
			unknown++
		} else {
			seen[n] = true
		}
	}
	nodes, s := slices.Sorted(maps.Keys(seen)), ""
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
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`|&;<>()*?[]{}~#") {
			out[i] = fmt.Sprintf("%q", a)
		}
	}
	return strings.Join(out, " ")
}

// WriteExplain says why the devices were chosen: the chosen set, the
// next best and the naive pick with their scores, the ring, the term
// that decided and the gain over naive. Choice must be set.
func (pl *Plan) WriteExplain(w io.Writer) {
	m, c := pl.Model, pl.Choice
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
	// A tie with the runner-up, then what beat the best different score.
	for i, a := range c.Alternatives {
		differs := c.Score.Compare(a.Score) != 0
		if differs || i == 0 {
			fmt.Fprintf(w, "  %s\n", decidedBy(c.Score, a))
		}
		if differs {
			break
		}
	}
	if n := c.Naive; n != nil && len(n.Score.Terms) > 0 && len(c.Score.Terms) > 0 && n.Score.Terms[0].Value > 0 {
		t, naive := c.Score.Terms[0], n.Score.Terms[0].Value
		fmt.Fprintf(w, "  %s: chosen %g %s vs naive %g %s (%.2fx)\n", t.Name, t.Value, t.Unit, naive, t.Unit, t.Value/naive)
	}
}

// gapString says how far from proven an inexact choice is.
func gapString(c *selector.Choice) string {
	g := gapOf(c)
	if g == nil {
		return "no bound"
	}
	return fmt.Sprintf("%s within %.1f%% of its upper bound %g %s", g.Term, 100*g.Relative, g.Bound, g.Unit)
}

func ringString(m *topology.Model, ring []int) string {
	var b strings.Builder
	for i, d := range ring {
		l := m.Link(d, ring[(i+1)%len(ring)])
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

// decidedBy says which score term put the chosen set ahead of alt.
func decidedBy(chosen selector.Score, alt selector.Candidate) string {
	var equal []string
	for i, t := range chosen.Terms[:min(len(chosen.Terms), len(alt.Score.Terms))] {
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

// cappedFlag names what stopped an unproven search.
func cappedFlag(c *selector.Choice) string {
	switch c.CappedBy {
	case selector.CappedByWork:
		return "--search-work"
	case selector.CappedByTime:
		return "the --search-budget time cap (the answer depends on the machine's load)"
	}
	return "the ring search's step cap"
}
