package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// BindMode says how ranks are bound to host CPUs.
type BindMode string

// Bind modes.
const (
	// BindNUMA binds a rank to the CPUs of its device's NUMA node.
	BindNUMA BindMode = "numa"
	// BindExclusive splits each NUMA node's CPUs among the ranks on it.
	BindExclusive BindMode = "exclusive"
	// BindSocket binds a rank to every NUMA node of its device's socket.
	BindSocket BindMode = "socket"
	// BindCoreComplex gives each rank the CPUs of its own level-3 cache
	// of its device's NUMA node (one CCD of an AMD EPYC).
	BindCoreComplex BindMode = "core-complex"
	// BindNone leaves ranks on every CPU amdrun may use.
	BindNone BindMode = "none"
)

// MemPolicy says how a rank's memory is placed on host NUMA nodes.
type MemPolicy string

// Memory policies.
const (
	// MemBind allocates only on the rank's NUMA node (MPOL_BIND).
	MemBind MemPolicy = "bind"
	// MemPreferred prefers the rank's NUMA node (MPOL_PREFERRED).
	MemPreferred MemPolicy = "preferred"
	// MemNone keeps the default policy.
	MemNone MemPolicy = "none"
)

// BindModes are the bind modes, in the order help lists them.
var BindModes = []BindMode{BindNUMA, BindExclusive, BindSocket, BindCoreComplex, BindNone}

// ParseBindMode parses one of BindModes (any case) or ""; another value
// gives an error that lists the valid ones.
func ParseBindMode(s string) (BindMode, error) {
	m := BindMode(strings.ToLower(strings.TrimSpace(s)))
	if s == "" || slices.Contains(BindModes, m) {
		return m, nil
	}
	return "", fmt.Errorf("bind: unknown mode %q (valid: numa, exclusive, socket, core-complex, none)", s)
}

// LeasesCPUs says whether ranks bound so lease CPUs of their own.
func (m BindMode) LeasesCPUs() bool { return m == BindExclusive || m == BindCoreComplex }

// ParseMemPolicy parses "bind", "preferred" or "none" (any case); another
// value gives an error that lists the valid ones.
func ParseMemPolicy(s string) (MemPolicy, error) {
	switch p := MemPolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case MemBind, MemPreferred, MemNone:
		return p, nil
	}
	return "", fmt.Errorf("mem policy: unknown policy %q (valid: bind, preferred, none)", s)
}

// home is where a rank belongs: its devices' NUMA nodes (or a CPU rank's
// one), and its name in a warning.
type home struct {
	nodes []int // ascending, distinct; may hold ids the host lacks (-1: unknown)
	what  string
	devs  []topology.Device // a device rank's devices
}

// deviceHomes is each rank's devices' NUMA nodes.
func deviceHomes(groups [][]topology.Device) []home {
	out := make([]home, len(groups))
	for lr, devs := range groups {
		var nodes []int
		for _, d := range devs {
			if !slices.Contains(nodes, d.NUMANode) {
				nodes = append(nodes, d.NUMANode)
			}
		}
		slices.Sort(nodes)
		noun := "device"
		if len(devs) > 1 {
			noun = "devices"
		}
		out[lr] = home{nodes: nodes, what: fmt.Sprintf("%d (%s %s, NUMA node %s)", lr, noun, topology.JoinInts(Indices(devs)), topology.JoinInts(nodes)), devs: devs}
	}
	return out
}

// cpuHomes spreads n CPU ranks over the NUMA nodes with CPUs amdrun may
// use in contiguous blocks, so that neighbouring ranks share a node;
// unbound, or without NUMA nodes, the ranks have no home.
func cpuHomes(n int, host []topology.NUMANode, allowedList []int, mode BindMode) []home {
	var usable []int // none: bindRanks says the host's nodes are unusable
	if mode != BindNone {
		allowed := UsableCPUs(host, allowedList)
		for _, h := range host {
			if len(intersect(h.CPUs, allowed)) > 0 {
				usable = append(usable, h.ID)
			}
		}
		slices.Sort(usable)
	}
	out := make([]home, n)
	for lr := range out {
		out[lr].what = strconv.Itoa(lr)
		if len(usable) > 0 {
			out[lr].nodes = []int{usable[lr*len(usable)/n]}
		}
	}
	return out
}

// binding is one rank's NUMA nodes and CPU set.
type binding struct {
	nodes []int // nil: none
	cpus  []int // nil: unbound
}

// bindRanks computes each rank's binding, appending warnings, and the
// mode the ranks got (Plan.Bound).
func bindRanks(homes []home, s Spec, mode BindMode, warn *[]string) ([]binding, BindMode) {
	out := make([]binding, len(homes))
	if mode == BindNone {
		return out, mode
	}
	host := s.HostNUMA
	if len(host) == 0 {
		*warn = append(*warn, fmt.Sprintf("bind %s: the host's NUMA nodes are unknown: ranks are not bound", mode))
		return out, mode
	}
	allowed := UsableCPUs(host, s.AllowedCPUs)
	byID := map[int]topology.NUMANode{}
	for _, n := range host {
		byID[n.ID] = n
	}
	var homeless, empty []string
	onNodes := map[string][]int{} // node set -> local ranks on it, in order
	var keys []string
	for lr, h := range homes {
		if len(h.nodes) == 0 || slices.ContainsFunc(h.nodes, func(id int) bool { _, ok := byID[id]; return !ok }) {
			homeless = append(homeless, h.what)
			continue
		}
		var cpus []int
		for _, id := range h.nodes {
			cpus = append(cpus, intersect(byID[id].CPUs, allowed)...)
		}
		if len(cpus) == 0 {
			empty = append(empty, fmt.Sprintf("%d (NUMA node %s)", lr, topology.JoinInts(h.nodes)))
			continue
		}
		slices.Sort(cpus)
		out[lr] = binding{nodes: append([]int(nil), h.nodes...), cpus: cpus}
		key := topology.JoinInts(h.nodes)
		if _, ok := onNodes[key]; !ok {
			keys = append(keys, key)
		}
		onNodes[key] = append(onNodes[key], lr)
	}
	if len(homeless) > 0 {
		*warn = append(*warn, "bind: the host has no NUMA node for local rank(s) "+strings.Join(homeless, ", ")+": they are not bound")
	}
	if len(empty) > 0 {
		*warn = append(*warn, "bind: amdrun may use none of the CPUs of the NUMA node of local rank(s) "+strings.Join(empty, ", ")+": they are not bound")
	}
	if (mode == BindSocket || mode == BindCoreComplex) && s.CPUGroups == nil {
		*warn = append(*warn, fmt.Sprintf("bind %s: the host's sockets and caches are unknown: ranks are bound to their NUMA nodes", mode))
		return out, BindNUMA
	}
	slices.SortFunc(keys, func(a, b string) int { return slices.Compare(out[onNodes[a][0]].nodes, out[onNodes[b][0]].nodes) })
	switch mode {
	case BindSocket:
		bindSockets(out, host, allowed, s.CPUGroups)
	case BindExclusive, BindCoreComplex:
		if !splitRanks(out, homes, keys, onNodes, s, mode, byID, allowed, warn) {
			return out, BindNUMA
		}
	}
	return out, mode
}

// splitRanks gives exclusive and core-complex ranks CPUs of their own:
// their fair share (share.go) where the node's devices are known (for
// core-complex: fewer complexes than devices), else a part of their node
// set's free CPUs or complexes. False, with one warning, when leased CPUs
// left too few.
func splitRanks(out []binding, homes []home, keys []string, onNodes map[string][]int, s Spec, mode BindMode, byID map[int]topology.NUMANode, allowed []int, warn *[]string) bool {
	split, unit, one := splitExclusive, "CPUs", "a CPU"
	if mode == BindCoreComplex {
		split, unit, one = splitComplexes(s.CPUGroups), "core complexes", "a core complex"
	}
	parts, shared, short, notes := shareAll(out, homes, s, byID, allowed)
	if !shared || mode == BindCoreComplex && !fewerComplexes(s, homes, byID, allowed) {
		parts, short, notes = splitAll(out, keys, onNodes, s.BusyCPUs, split, unit)
		if len(notes) > 0 {
			notes = []string{fmt.Sprintf("bind %s: more ranks than %s on %s: some ranks share %s", mode, unit, strings.Join(notes, ", "), one)}
		}
		if s.CPUsPerRank > 0 {
			notes = append(notes, fmt.Sprintf("bind %s: --cpus-per-rank applies to GPU ranks on NUMA nodes with a CPU per GPU: the ranks split their nodes' CPUs", mode))
		}
	} else if len(notes) > 0 {
		notes = []string{fmt.Sprintf("bind %s: --cpus-per-rank %d: the other CPUs of the ranks' NUMA nodes are leased or other devices' shares: %s", mode, s.CPUsPerRank, strings.Join(notes, ", "))}
	}
	if short != "" {
		*warn = append(*warn, fmt.Sprintf("bind %s: other amdrun jobs lease CPUs of %s: ranks share their NUMA nodes' CPUs (bind numa)", mode, short))
		return false
	}
	for lr, cpus := range parts {
		out[lr].cpus = cpus
	}
	*warn = append(*warn, notes...)
	return true
}

// bindSockets widens each bound rank to every NUMA node of its CPUs'
// sockets, with those nodes' allowed CPUs.
func bindSockets(out []binding, host []topology.NUMANode, allowed []int, g *topology.CPUGroups) {
	for lr, b := range out {
		if b.cpus == nil {
			continue
		}
		var sock, cpus []int
		for _, c := range b.cpus {
			if i := g.SocketOf(c); i >= 0 && !slices.Contains(sock, i) {
				sock, cpus = append(sock, i), append(cpus, g.Sockets[i]...)
			}
		}
		var nodes []int
		for _, n := range host {
			if len(intersect(n.CPUs, cpus)) > 0 {
				nodes = append(nodes, n.ID)
			}
		}
		slices.Sort(nodes)
		if cpus = intersect(UsableCPUs(nil, cpus), allowed); len(cpus) > 0 {
			out[lr] = binding{nodes: nodes, cpus: cpus}
		}
	}
}

// splitter divides one NUMA node set's free CPUs (all: its allowed ones)
// among k ranks: each rank's part, ok false when busy CPUs leave too few,
// and how many units (CPUs, caches) it has: with fewer than k, ranks
// share them.
type splitter func(all, free []int, k int) (parts [][]int, ok bool, units int)

// splitExclusive gives each rank a contiguous share of the free CPUs.
func splitExclusive(all, free []int, k int) ([][]int, bool, int) {
	src, ok := free, true
	switch {
	case k > len(all):
		// Fewer CPUs than ranks: they share, even when nothing is busy.
		src, ok = all, len(free) == len(all)
	case k > len(free):
		return nil, false, len(all)
	}
	parts := make([][]int, k)
	for j := range parts {
		parts[j] = chunk(src, j, k)
	}
	return parts, ok, len(all)
}

// splitComplexes gives each rank its own level-3 cache of g that no other
// job uses.
func splitComplexes(g *topology.CPUGroups) splitter {
	return func(all, free []int, k int) ([][]int, bool, int) {
		var units, freeUnits [][]int
		for _, l3 := range g.L3 {
			u := intersect(l3, all)
			if len(u) == 0 {
				continue
			}
			units = append(units, u)
			if len(intersect(u, free)) == len(u) {
				freeUnits = append(freeUnits, u)
			}
		}
		if len(units) == 0 {
			units = [][]int{all} // no cache listed here: the node is one unit
			if len(free) == len(all) {
				freeUnits = units
			}
		}
		parts := make([][]int, k)
		if k > len(units) {
			for j := range parts {
				parts[j] = units[j%len(units)]
			}
			return parts, len(freeUnits) == len(units), len(units)
		}
		if k > len(freeUnits) {
			return nil, false, len(units)
		}
		for j := range parts {
			parts[j] = append([]int(nil), freeUnits[j]...)
		}
		return parts, true, len(units)
	}
}

// splitAll runs split on each node set's ranks; short names the first
// where busy CPUs left too few, notes those whose ranks share units.
func splitAll(out []binding, keys []string, onNodes map[string][]int, busy []int, split splitter, unit string) (parts map[int][]int, short string, notes []string) {
	parts = map[int][]int{}
	for _, key := range keys {
		ranks := onNodes[key]
		all := out[ranks[0]].cpus
		free := filter(all, busy, false)
		got, ok, units := split(all, free, len(ranks))
		if !ok {
			return nil, fmt.Sprintf("NUMA node %s (%s of its CPUs %s; %d ranks here)", key,
				topology.FormatCPUList(intersect(all, busy)), topology.FormatCPUList(all), len(ranks)), nil
		}
		if len(ranks) > units {
			notes = append(notes, fmt.Sprintf("NUMA node %s (%d ranks, %d %s)", key, len(ranks), units, unit))
		}
		for j, lr := range ranks {
			parts[lr] = got[j]
		}
	}
	return parts, "", notes
}

// chunk returns the j-th of k contiguous, near-equal parts of cpus (the
// first len%k one longer); with more parts than CPUs, CPU j mod len.
func chunk(cpus []int, j, k int) []int {
	n := len(cpus)
	if k > n {
		return []int{cpus[j%n]}
	}
	size, extra := n/k, n%k
	return append([]int(nil), cpus[j*size+min(j, extra):(j+1)*size+min(j+1, extra)]...)
}

// ompThreads is the rank's share of its CPUs, a set several ranks share
// divided among them; an unbound rank's share of all allowed CPUs.
func ompThreads(b binding, all []binding, nAllowed, nproc int) int {
	if len(b.cpus) == 0 {
		return max(1, nAllowed/nproc) // nproc >= 1: this rank is one
	}
	sharing := 0
	for _, o := range all {
		if slices.Equal(o.cpus, b.cpus) {
			sharing++
		}
	}
	return max(1, len(b.cpus)/max(1, sharing))
}

// UsableCPUs are the CPUs of allowed (Spec.AllowedCPUs), or every CPU of
// the host's NUMA nodes when it is nil; sorted, distinct.
func UsableCPUs(host []topology.NUMANode, allowed []int) []int {
	out := append([]int(nil), allowed...)
	if allowed == nil {
		for _, n := range host {
			out = append(out, n.CPUs...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// intersect returns the CPUs of a that are in b, sorted.
func intersect(a, b []int) []int {
	out := filter(a, b, true)
	slices.Sort(out)
	return out
}

// filter returns the CPUs of a that are in b (in) or not, in a's order.
func filter(a, b []int, in bool) []int {
	set := make(map[int]bool, len(b))
	for _, c := range b {
		set[c] = true
	}
	var out []int
	for _, c := range a {
		if set[c] == in {
			out = append(out, c)
		}
	}
	return out
}
