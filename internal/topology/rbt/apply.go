package rbt

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// ErrNoPeerFigures is returned by Apply when the run has no GPU-to-GPU
// figure (a host-only or redacted run).
var ErrNoPeerFigures = errors.New("no GPU-to-GPU bandwidth figures")

// ErrMismatch is returned by Apply when the run's GPUs do not match the
// model's devices.
var ErrMismatch = errors.New("GPUs do not match the topology")

// Apply replaces the bandwidth of the links between GPUs of a finished
// model with r's figures in MB/s (see Copies), marking them Measured and
// P2P available and m.Bandwidth "measured". A pair without peer-to-peer
// access keeps its link, marked P2PUnavailable, as does a pair without a
// figure; one warning lists each kind. An error leaves m unchanged.
func Apply(m *topology.Model, r *Result, warn topology.Warner) error {
	c, err := r.Copies(m, warn)
	if err != nil {
		return err
	}
	// Work on a copy, validated before m changes, so that an error leaves m.
	next := *m
	next.Links = slices.Clone(m.Links)
	var noP2P, noFigure []string
	updated, n := 0, m.N()
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			pair := fmt.Sprintf("%d-%d", a, b)
			lo, hi, ok := c.pair(a, b)
			if !ok && c.P2P[a][b] != topology.P2PUnavailable {
				noFigure = append(noFigure, pair)
				continue
			}
			l := next.Link(a, b)
			if l == nil {
				return fmt.Errorf("%s: %w: no link %d-%d in the topology", Source, topology.ErrInvalidModel, a, b)
			}
			updated++
			if ok {
				l.P2P, l.MinBandwidth, l.MaxBandwidth = topology.P2PAvailable, lo, hi
				l.Measured, l.Assumed = true, false
				next.Bandwidth = "measured"
			} else {
				l.P2P = topology.P2PUnavailable
				noP2P = append(noP2P, pair)
			}
		}
	}
	if updated == 0 && n > 1 {
		return fmt.Errorf("%s: %w", Source, ErrNoPeerFigures)
	}
	if err := next.Validate(); err != nil {
		return fmt.Errorf("%s: %w", Source, err)
	}
	if len(noP2P) > 0 {
		warn.Warn("%s: no peer-to-peer access between GPU %s; copies between them go through host memory (theoretical links kept, marked in amdrun topo)", Source, strings.Join(noP2P, ", "))
	}
	if len(noFigure) > 0 {
		warn.Warn("%s: no figure for GPU %s; keeping the theoretical bandwidth", Source, strings.Join(noFigure, ", "))
	}
	m.Links, m.Bandwidth = next.Links, next.Bandwidth
	return nil
}

// Copies is what a run measured between the devices of a model.
type Copies struct {
	// MBps[a][b] is the copy bandwidth in MB/s from device a to b: the
	// unidirectional figure when the pair has one, else half the
	// bidirectional one; 0 where none and on the diagonal.
	MBps [][]float64
	// P2P[a][b] is the pair's Result.P2P, unknown on the diagonal.
	P2P [][]topology.P2P
}

// Copies matches r's GPU agents to m's devices, by PCI address when all
// have one, else in HIP's order checked against the names (byOrder), with
// a warning, and returns what r measured between them. Counts that differ,
// an unknown address or names that contradict the order give ErrMismatch.
func (r *Result) Copies(m *topology.Model, warn topology.Warner) (*Copies, error) {
	gpus := r.GPUs()
	if len(gpus) != m.N() {
		return nil, fmt.Errorf("%s: %w: %d GPU agents, %d devices in the topology", Source, ErrMismatch, len(gpus), m.N())
	}
	dev, err := matchDevices(m, r, gpus, warn)
	if err != nil {
		return nil, err
	}
	n := m.N()
	c := &Copies{MBps: make([][]float64, n), P2P: make([][]topology.P2P, n)}
	for a := range c.MBps {
		c.MBps[a], c.P2P[a] = make([]float64, n), make([]topology.P2P, n)
	}
	for x := range gpus {
		for y := range gpus {
			if x == y {
				continue
			}
			a, b := dev[x], dev[y]
			c.P2P[a][b] = r.P2P(gpus[x], gpus[y])
			c.MBps[a][b] = r.copyFigure(gpus[x], gpus[y])
		}
	}
	return c, nil
}

// copyFigure is the MB/s of a copy from GPU agent x to y: the
// unidirectional figure when the pair has one either way, else half the
// bidirectional one; 0 when it has neither.
func (r *Result) copyFigure(x, y int) float64 {
	v, there := r.Uni.At(x, y)
	if _, back := r.Uni.At(y, x); !there && !back {
		b, ok := r.Bi.At(x, y)
		if !ok {
			b, _ = r.Bi.At(y, x)
		}
		v = b / 2
	}
	if v <= 0 {
		return 0
	}
	return max(math.Round(v*1000), 1) // GB/s to whole MB/s; below 0.5 MB/s is still one
}

// pair returns the lower and higher figure between devices a and b, if any.
func (c *Copies) pair(a, b int) (lo, hi int64, ok bool) {
	x, y := c.MBps[a][b], c.MBps[b][a]
	if x <= 0 {
		x = y
	} else if y <= 0 {
		y = x
	}
	if x <= 0 {
		return 0, 0, false
	}
	return max(int64(min(x, y)), 1), max(int64(max(x, y)), 1), true
}

// matchDevices returns the model device of each GPU agent.
func matchDevices(m *topology.Model, r *Result, gpus []int, warn topology.Warner) ([]int, error) {
	byAddr := map[string]int{}
	for i, d := range m.Devices {
		k, ok := parsePCI(d.PCIAddress)
		if !ok {
			return byOrder(m, r, gpus, warn, "the topology's devices have no PCI address")
		}
		if _, dup := byAddr[k]; dup {
			return byOrder(m, r, gpus, warn, "devices share PCI address "+d.PCIAddress)
		}
		byAddr[k] = i
	}
	out := make([]int, len(gpus))
	used := map[int]bool{}
	var missing []string
	for x, g := range gpus {
		k, ok := parsePCI(r.Agents[g].PCI)
		if !ok {
			return byOrder(m, r, gpus, warn, "its device lines carry no bus address")
		}
		i, ok := byAddr[k]
		if !ok || used[i] {
			missing = append(missing, r.Agents[gpus[x]].PCI)
			continue
		}
		used[i] = true
		out[x] = i
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: %w: GPU bus %s not in the topology", Source, ErrMismatch, strings.Join(missing, ", "))
	}
	return out, nil
}

// byOrder matches the k-th GPU agent to the k-th device in HIP's order,
// warning with why unless Result.Here. Where the run's GPU names and the
// model's share a vocabulary (some name is in both), each named GPU must
// land on a device of that name, else the error wraps ErrMismatch.
func byOrder(m *topology.Model, r *Result, gpus []int, warn topology.Warner, why string) ([]int, error) {
	order := runtimeOrder(m)
	norm := func(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
	devNames := map[string]bool{}
	for _, d := range m.Devices {
		devNames[norm(d.Name)] = true
	}
	shared := slices.ContainsFunc(gpus, func(g int) bool { n := norm(r.Agents[g].Name); return n != "" && devNames[n] })
	for x, g := range gpus {
		a, d := r.Agents[g].Name, m.Devices[order[x]].Name
		if shared && norm(a) != "" && norm(a) != norm(d) {
			return nil, fmt.Errorf("%s: %w: %s, and matched by order its GPU %d (%q) would be device %d (%q)", Source, ErrMismatch, why, x, a, order[x], d)
		}
	}
	if !r.Here {
		warn.Warn("%s: %s; its %d GPUs are taken to be the topology's in HIP's device order", Source, why, len(gpus))
	}
	return order, nil
}

// runtimeOrder maps the k-th GPU agent to the device HIP numbers k (the
// tool's order) when runtime indices are exactly 0..N-1, else to device k.
func runtimeOrder(m *topology.Model) []int {
	order := make([]int, m.N())
	seen := make([]bool, m.N())
	for i, d := range m.Devices {
		if d.RuntimeIndex < 0 || d.RuntimeIndex >= m.N() || seen[d.RuntimeIndex] {
			for k := range order {
				order[k] = k
			}
			return order
		}
		seen[d.RuntimeIndex] = true
		order[d.RuntimeIndex] = i
	}
	return order
}
