package rbt

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// ErrNoPeerFigures is returned by Apply when the run has no GPU-to-GPU
// figure at all (a host-only or redacted run).
var ErrNoPeerFigures = errors.New("no GPU-to-GPU bandwidth figures")

// ErrMismatch is returned by Apply when the run's GPUs do not match the
// model's devices (count or PCI addresses).
var ErrMismatch = errors.New("GPUs do not match the topology")

// Apply replaces the bandwidth of the links between GPUs of a finished
// model with the figures r measured, in MB/s (GB/s x 1000): the two
// unidirectional figures when printed, else half the bidirectional one.
// MinBandwidth and MaxBandwidth become the lower and higher of the two
// directions. Such links are marked Measured and not Assumed, and
// m.Bandwidth becomes "measured". Links with no figure keep their
// theoretical value (with a warning).
//
// GPU agents are matched to devices by PCI bus, device and function when
// every agent and every device has an address, else by order. Apply
// returns an error wrapping ErrMismatch when the counts differ or an
// address is not in the model, ErrNoPeerFigures when r has no
// GPU-to-GPU figure, and the model's Validate error should the result be
// invalid. m is not changed when an error is returned.
func Apply(m *topology.Model, r *Result, warn topology.Warner) error {
	if m == nil || r == nil {
		return fmt.Errorf("%s: nil model or result", Source)
	}
	gpus := r.GPUs()
	if len(gpus) != m.N() {
		return fmt.Errorf("%s: %w: %d GPU agents, %d devices in the topology", Source, ErrMismatch, len(gpus), m.N())
	}
	dev, err := matchDevices(m, r, gpus, warn)
	if err != nil {
		return err
	}
	type figure struct {
		a, b     int
		min, max int64
	}
	var figs []figure
	for x := 0; x < len(gpus); x++ {
		for y := x + 1; y < len(gpus); y++ {
			gx, gy := gpus[x], gpus[y]
			var dirs []float64
			if v, ok := r.Uni.At(gx, gy); ok && v > 0 {
				dirs = append(dirs, v)
			}
			if v, ok := r.Uni.At(gy, gx); ok && v > 0 {
				dirs = append(dirs, v)
			}
			if len(dirs) == 0 {
				if v, ok := r.Bi.At(gx, gy); ok && v > 0 {
					dirs = append(dirs, v/2)
				}
				if v, ok := r.Bi.At(gy, gx); ok && v > 0 {
					dirs = append(dirs, v/2)
				}
			}
			a, b := dev[x], dev[y]
			if len(dirs) == 0 {
				warn.Warn("%s: no figure for GPU %d-%d; keeping the theoretical bandwidth", Source, a, b)
				continue
			}
			lo, hi := dirs[0], dirs[0]
			for _, d := range dirs[1:] {
				lo, hi = math.Min(lo, d), math.Max(hi, d)
			}
			f := figure{a: a, b: b, min: mbps(lo), max: mbps(hi)}
			if f.min <= 0 {
				f.min = 1
			}
			if f.max < f.min {
				f.max = f.min
			}
			figs = append(figs, f)
		}
	}
	if len(figs) == 0 && len(gpus) > 1 {
		return fmt.Errorf("%s: %w", Source, ErrNoPeerFigures)
	}
	for _, f := range figs {
		if m.Link(f.a, f.b) == nil {
			return fmt.Errorf("%s: %w: no link %d-%d in the topology", Source, topology.ErrInvalidModel, f.a, f.b)
		}
	}
	for _, f := range figs {
		l := m.Link(f.a, f.b)
		l.MinBandwidth, l.MaxBandwidth = f.min, f.max
		l.Measured, l.Assumed = true, false
	}
	m.Bandwidth = "measured"
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%s: %w", Source, err)
	}
	return nil
}

// mbps converts GB/s to whole MB/s.
func mbps(gbs float64) int64 { return int64(math.Round(gbs * 1000)) }

// matchDevices returns, for each GPU agent in order, the model device it
// measured.
func matchDevices(m *topology.Model, r *Result, gpus []int, warn topology.Warner) ([]int, error) {
	order := make([]int, len(gpus))
	for i := range order {
		order[i] = i
	}
	byAddr := map[[3]uint64]int{}
	for i, d := range m.Devices {
		if d.PCIAddress == "" {
			return order, nil
		}
		k, ok := parsePCI(d.PCIAddress)
		if !ok {
			return order, nil
		}
		if _, dup := byAddr[k]; dup {
			warn.Warn("%s: devices share PCI address %s; matching GPUs by order", Source, d.PCIAddress)
			return order, nil
		}
		byAddr[k] = i
	}
	keys := make([][3]uint64, len(gpus))
	for x, g := range gpus {
		k, ok := parsePCI(r.Agents[g].PCI)
		if !ok {
			return order, nil
		}
		keys[x] = k
	}
	out := make([]int, len(gpus))
	used := map[int]bool{}
	var missing []string
	for x, k := range keys {
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
