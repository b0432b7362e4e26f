package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParseCPUList parses a Linux CPU list ("0-3,8,10-11") into sorted,
// distinct CPU numbers; "" gives nil.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("cpu list %q: empty element", s)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: bad cpu %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		if b-a > 1<<16 {
			return nil, fmt.Errorf("cpu list %q: range %q too large", s, part)
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// FormatCPUList writes CPUs as a compact list, "0-3,8,10-11".
func FormatCPUList(cpus []int) string {
	c := slices.Sorted(slices.Values(cpus))
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] <= c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", c[i])
		if j > i {
			fmt.Fprintf(&b, "-%d", c[j])
		}
		i = j + 1
	}
	return b.String()
}

// JoinInts writes xs as "0,1,6,7", without ranges.
func JoinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// CheckDeviceCPUs warns once per device whose CPU list names CPUs outside
// possible (a list printed wrong, issue 24), keeping the list, and returns
// how many it warned.
func CheckDeviceCPUs(m *Model, possible []int, warn Warner) int {
	if len(possible) == 0 {
		return 0
	}
	ok := make(map[int]bool, len(possible))
	for _, c := range possible {
		ok[c] = true
	}
	n := 0
	for _, d := range m.Devices {
		if out := slices.DeleteFunc(slices.Clone(d.CPUs), func(c int) bool { return ok[c] }); len(out) > 0 {
			n++
			warn.Warn("%s: device %d lists CPUs %s that this host does not have (possible CPUs %s); the list is kept as the tool printed it",
				m.Source, d.Index, FormatCPUList(out), FormatCPUList(possible))
		}
	}
	return n
}

// CPUGroups are the host's CPUs grouped beyond NUMA nodes: sockets and
// level-3 caches (one CCD of an AMD EPYC), for binding.
type CPUGroups struct {
	Sockets [][]int `json:"sockets"` // the online CPUs of each package, by package id
	// L3 are the online CPUs sharing each level-3 cache, by first CPU; a
	// cache spanning NUMA nodes is listed once per node.
	L3 [][]int `json:"l3"`
	// SocketsGap and L3Gap say in one line what the host did not tell when
	// Sockets or L3 leave CPUs out ("" when they hold them all).
	SocketsGap string `json:"-"`
	L3Gap      string `json:"-"`
}

// SocketOf returns the index in Sockets of the socket holding CPU c, or -1.
func (g *CPUGroups) SocketOf(c int) int {
	return slices.IndexFunc(g.Sockets, func(s []int) bool { return slices.Contains(s, c) })
}
