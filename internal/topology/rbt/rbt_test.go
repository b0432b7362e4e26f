package rbt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

func public(t testing.TB, name string) []byte {
	t.Helper()
	return testutil.ReadFile(t, testutil.Public(t, name))
}

func mine(t testing.TB, name string) []byte {
	t.Helper()
	return testutil.ReadFile(t, testutil.Testdata(t, "rocm_bandwidth_test", name))
}

func parse(t *testing.T, b []byte) *Result {
	t.Helper()
	r, err := Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// figure returns the figure between the devices labelled from and to.
func figure(t *testing.T, r *Result, m *Matrix, from, to string) float64 {
	t.Helper()
	idx := map[string]int{}
	for i, a := range r.Agents {
		idx[a.Label] = i
	}
	v, ok := m.At(idx[from], idx[to])
	if !ok {
		t.Fatalf("no figure %s -> %s", from, to)
	}
	return v
}

func TestArcher2(t *testing.T) {
	r := parse(t, public(t, "rocm-bandwidth-test-mi210-4gpu-epyc7543p-archer2.txt"))
	if len(r.Agents) != 8 || len(r.GPUs()) != 4 {
		t.Fatalf("%d agents, %d GPUs", len(r.Agents), len(r.GPUs()))
	}
	want := Agent{Label: "5", GPU: true, Name: "", PCI: "87:0.0"}
	if r.Agents[5] != want {
		t.Fatalf("agent 5 = %+v, want %+v", r.Agents[5], want)
	}
	if a := r.Agents[2]; a.GPU || a.Name != "AMD EPYC 7543P 32-Core Processor" {
		t.Fatalf("agent 2 = %+v", a)
	}
	if v := figure(t, r, r.Uni, "4", "5"); v != 42.239 {
		t.Errorf("uni 4->5 = %v", v)
	}
	if v := figure(t, r, r.Bi, "6", "7"); v != 80.896 {
		t.Errorf("bi 6-7 = %v", v)
	}
	if _, ok := r.Uni.At(0, 1); ok {
		t.Error("CPU-CPU N/A cell has a figure")
	}
	host := hostFigures(r)
	if len(host) != 16 {
		t.Fatalf("%d host figures", len(host))
	}
	if h := host[0]; h != (HostFigure{CPU: 0, GPU: 0, HostToDevice: 26.977, DeviceToHost: 28.169, Bidirectional: 40.480}) {
		t.Errorf("host[0] = %+v", h)
	}
}

func TestRedactedExcerpt(t *testing.T) {
	r := parse(t, public(t, "rocm-bandwidth-test-bidir-excerpt-mi250-8gcd-2cpu-redacted.txt"))
	if len(r.Agents) != 10 || len(r.GPUs()) != 8 || r.Uni != nil {
		t.Fatalf("%d agents, %d GPUs, uni %v", len(r.Agents), len(r.GPUs()), r.Uni)
	}
	if v := figure(t, r, r.Bi, "0", "cpu0"); v != 47.763 {
		t.Errorf("GPU 0 to cpu0 = %v", v)
	}
	var got HostFigure
	for _, h := range hostFigures(r) {
		if h.CPU == 0 && h.GPU == 0 {
			got = h
		}
	}
	if got.Bidirectional != 47.763 || got.HostToDevice != 0 {
		t.Errorf("host figure %+v", got)
	}
	// The excerpt has no GPU-to-GPU figure to apply.
	m := model(t, 8, nil)
	if err := Apply(m, r, nil); !errors.Is(err, ErrNoPeerFigures) {
		t.Fatalf("Apply: %v", err)
	}
	if m.Bandwidth != "theoretical" {
		t.Fatal("model changed on error")
	}
}

// model returns a finished all-XGMI model of n devices at the given
// addresses (nil: none).
func model(t *testing.T, n int, pci []string) *topology.Model {
	t.Helper()
	m := &topology.Model{Source: "test", Vendor: topology.VendorAMD}
	for i := 0; i < n; i++ {
		d := topology.Device{Index: i, RuntimeIndex: i, NUMANode: -1}
		if pci != nil {
			d.PCIAddress = pci[i]
		}
		m.Devices = append(m.Devices, d)
		for j := 0; j < i; j++ {
			m.Links = append(m.Links, topology.Link{A: j, B: i, Type: topology.LinkXGMI, Hops: 1, Weight: 15, MinBandwidth: 50000, MaxBandwidth: 50000, Direct: true})
		}
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestApplyArcher2ByBus(t *testing.T) {
	r := parse(t, public(t, "rocm-bandwidth-test-mi210-4gpu-epyc7543p-archer2.txt"))
	// The model lists the GPUs in bus order; the tool printed c9, 87, 49, 09.
	m := model(t, 4, []string{"0000:09:00.0", "0000:49:00.0", "0000:87:00.0", "0000:c9:00.0"})
	if err := Apply(m, r, nil); err != nil {
		t.Fatal(err)
	}
	// Tool devices 4 (c9) and 5 (87) are model devices 3 and 2:
	// 4->5 42.239, 5->4 42.243.
	l := m.Link(2, 3)
	if l.MinBandwidth != 42239 || l.MaxBandwidth != 42243 || !l.Measured || l.Assumed || m.Bandwidth != "measured" {
		t.Fatalf("link 2-3 = %+v, bandwidth %q", *l, m.Bandwidth)
	}
	// Tool 6 (49) -> 7 (09) 42.277, back 42.264: model devices 1 and 0.
	if l := m.Link(0, 1); l.MinBandwidth != 42264 || l.MaxBandwidth != 42277 {
		t.Fatalf("link 0-1 = %+v", *l)
	}
}

func TestApplyByOrderAndBidirectional(t *testing.T) {
	// Drop the unidirectional matrix: half the bidirectional figure is used.
	b := public(t, "rocm-bandwidth-test-mi210-4gpu-epyc7543p-archer2.txt")
	i := bytes.Index(b, []byte("Unidirectional"))
	j := bytes.Index(b, []byte("Bidirectional"))
	r := parse(t, append(append([]byte{}, b[:i]...), b[j:]...))
	m := model(t, 4, nil)
	if err := Apply(m, r, nil); err != nil {
		t.Fatal(err)
	}
	if l := m.Link(0, 1); l.MaxBandwidth != 40473 || l.MinBandwidth != 40473 || !l.Measured {
		t.Fatalf("link 0-1 = %+v", *l) // 80.946 / 2
	}
}

func TestApplyMismatch(t *testing.T) {
	r := parse(t, public(t, "rocm-bandwidth-test-mi210-4gpu-epyc7543p-archer2.txt"))
	if err := Apply(model(t, 8, nil), r, nil); !errors.Is(err, ErrMismatch) || err.Error() != "rocm_bandwidth_test: GPUs do not match the topology: 4 GPU agents, 8 devices in the topology" {
		t.Fatalf("err = %v", err)
	}
	m := model(t, 4, []string{"0000:09:00.0", "0000:49:00.0", "0000:87:00.0", "0000:ca:00.0"})
	if err := Apply(m, r, nil); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "GPU bus c9:0.0 not in the topology") {
		t.Fatalf("err = %v", err)
	}
	if m.Link(0, 1).Measured {
		t.Fatal("model changed on error")
	}
}

// TestApplyLeavesModelOnError holds Apply to its doc: on error the model
// is unchanged, byte for byte in its JSON form. The models break an
// invariant Validate checks after the figures are in (before, Apply had
// already written the measured links when Validate refused).
func TestApplyLeavesModelOnError(t *testing.T) {
	r := parse(t, public(t, "rocm-bandwidth-test-mi210-4gpu-epyc7543p-archer2.txt"))
	addrs := []string{"0000:09:00.0", "0000:49:00.0", "0000:87:00.0", "0000:c9:00.0"}
	for _, tc := range []struct {
		name    string
		breakIt func(m *topology.Model)
		want    error
	}{
		{"duplicate NUMA node", func(m *topology.Model) {
			m.NUMANodes = []topology.NUMANode{{ID: 0, CPUs: []int{0}}, {ID: 0, CPUs: []int{1}}}
		}, topology.ErrInvalidModel},
		{"device CPU out of range", func(m *topology.Model) { m.Devices[2].CPUs = []int{-5} }, topology.ErrInvalidModel},
		{"bus not in the topology", func(m *topology.Model) { m.Devices[3].PCIAddress = "0000:ca:00.0" }, ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model(t, 4, addrs)
			tc.breakIt(m)
			before, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := Apply(m, r, nil); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			after, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Errorf("model changed on error:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestHandMade(t *testing.T) {
	r := parse(t, mine(t, "gfx90a-2cpu-4gpu-v2.6-indented.txt"))
	if len(r.Agents) != 6 || len(r.GPUs()) != 4 || r.Uni == nil || r.Bi == nil {
		t.Fatalf("%d agents", len(r.Agents))
	}
	if v := figure(t, r, r.Uni, "2", "3"); v != 49.215 {
		t.Errorf("uni 2->3 = %v", v)
	}
	if v := figure(t, r, r.Bi, "3", "2"); v != 96.612 {
		t.Errorf("bi 3-2 = %v", v)
	}
	m := model(t, 4, []string{"0000:c1:00.0", "0000:c5:00.0", "0000:81:00.0", "0000:85:00.0"})
	if err := Apply(m, r, nil); err != nil {
		t.Fatal(err)
	}
	if l := m.Link(0, 1); l.MinBandwidth != 49187 || l.MaxBandwidth != 49215 {
		t.Fatalf("link 0-1 = %+v", *l)
	}

	d := parse(t, mine(t, "mi300x-8gpu-gpu3-degraded-v2.0.1.txt"))
	if d.Bi == nil || d.Bi.Title != "Bdirectional copy peak bandwidth GB/s" {
		t.Fatalf("v2.0.1: %+v", d.Bi)
	}
	pci := []string{"0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0", "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0"}
	m = model(t, 8, pci)
	if err := Apply(m, d, nil); err != nil {
		t.Fatal(err)
	}
	if l := m.Link(0, 3); l.MinBandwidth != 11958 || l.MaxBandwidth != 12204 {
		t.Fatalf("link 0-3 = %+v", *l)
	}
	if l := m.Link(0, 1); l.MinBandwidth != 48377 || l.MaxBandwidth != 48512 {
		t.Fatalf("link 0-1 = %+v", *l)
	}
	for a := 0; a < 8; a++ {
		for b := a + 1; b < 8; b++ {
			slow := m.BW(a, b) < 20000
			if slow != (a == 3 || b == 3) {
				t.Errorf("link %d-%d = %d MB/s", a, b, m.BW(a, b))
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	hdr := "Unidirectional copy peak bandwidth GB/s\n\nD/D  0  1\n"
	for _, tc := range []struct {
		name string
		in   string
		want *topology.ParseError
	}{
		{"empty", "\n\n", &topology.ParseError{Source: Source, Err: topology.ErrEmpty}},
		{"other tool", "rocm-smi --showtopo\n", &topology.ParseError{Source: Source, Err: fmt.Errorf("%w: no rocm_bandwidth_test device list or matrix", topology.ErrWrongTool)}},
		{"no matrix", "Device: 0,  CPU\nDevice: 1,  ,  GPU-1,  03:0.0\n", &topology.ParseError{Source: Source, Err: fmt.Errorf("%w: no copy bandwidth matrix", topology.ErrTruncated)}},
		{"bad device", "  Device: x,  CPU\n", &topology.ParseError{Source: Source, Line: 1, Column: 2, Err: fmt.Errorf("%w: device number %q", topology.ErrBadNumber, "x")}},
		{"unknown label", "Device: 0,  CPU\n" + hdr, &topology.ParseError{Source: Source, Line: 4, Column: 8, Err: fmt.Errorf("%w: Unidirectional copy peak bandwidth GB/s: unknown device %q", topology.ErrSyntax, "1")}},
		{"short row", hdr + "0  N/A\n", &topology.ParseError{Source: Source, Line: 4, Column: 6, Err: fmt.Errorf("%w: Unidirectional copy peak bandwidth GB/s: row 0 has 1 cells, want 2", topology.ErrNotSquare)}},
		{"bad number", hdr + "0  N/A  1.2.3\n", &topology.ParseError{Source: Source, Line: 4, Column: 8, Err: fmt.Errorf("%w: Unidirectional copy peak bandwidth GB/s: %q", topology.ErrBadNumber, "1.2.3")}},
		{"repeated row", hdr + "0  N/A  1\n0  N/A  1\n", &topology.ParseError{Source: Source, Line: 5, Err: fmt.Errorf("%w: Unidirectional copy peak bandwidth GB/s: row %q twice", topology.ErrSyntax, "0")}},
		{"no D/D", "Bidirectional copy peak bandwidth GB/s\n0 1\n", &topology.ParseError{Source: Source, Line: 2, Err: fmt.Errorf("%w: Bidirectional copy peak bandwidth GB/s: header must start with D/D", topology.ErrSyntax)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in))
			var pe *topology.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v", err)
			}
			if pe.Source != tc.want.Source || pe.Line != tc.want.Line || pe.Column != tc.want.Column || pe.Err.Error() != tc.want.Err.Error() {
				t.Fatalf("err = %#v (%v)\nwant %#v (%v)", *pe, pe, *tc.want, tc.want)
			}
			if !errors.Is(err, sentinel(tc.want.Err)) {
				t.Fatalf("errors.Is(%v, %v) is false", err, sentinel(tc.want.Err))
			}
		})
	}
}

func sentinel(err error) error {
	for errors.Unwrap(err) != nil {
		err = errors.Unwrap(err)
	}
	return err
}

// TestEveryPublicFixture: each rocm_bandwidth_test capture parses; every
// other public capture is refused with a one-line ParseError.
func TestEveryPublicFixture(t *testing.T) {
	files, err := filepath.Glob(testutil.Public(t, "*"))
	if err != nil || len(files) < 40 {
		t.Fatalf("%d fixtures: %v", len(files), err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse(bytes.NewReader(b))
		isRBT := strings.HasPrefix(filepath.Base(f), "rocm-bandwidth-test-")
		switch {
		case isRBT && err != nil:
			t.Errorf("%s: %v", filepath.Base(f), err)
		case !isRBT && err == nil && filepath.Ext(f) != ".md":
			t.Errorf("%s: parsed as rocm_bandwidth_test output", filepath.Base(f))
		case err != nil:
			var pe *topology.ParseError
			if !errors.As(err, &pe) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v is not a one-line ParseError", filepath.Base(f), err)
			}
		}
	}
}

// FuzzParse checks that Parse never panics, errors are ParseErrors, and
// a parsed run applied to a model of as many GPUs leaves it valid.
func FuzzParse(f *testing.F) {
	for _, g := range []string{testutil.Public(f, "rocm-bandwidth-test-*"), testutil.Testdata(f, "rocm_bandwidth_test", "*.txt")} {
		files, _ := filepath.Glob(g)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(bytes.NewReader(data))
		if err != nil {
			var pe *topology.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a ParseError", err)
			}
			return
		}
		for _, h := range hostFigures(r) {
			if math.IsNaN(h.Bidirectional) || h.CPU < 0 || h.GPU < 0 {
				t.Fatalf("host figure %+v", h)
			}
		}
		g := r.GPUs()
		for x := range g {
			for y := range g {
				if p := r.P2P(g[x], g[y]); p < topology.P2PUnknown || p > topology.P2PUnavailable {
					t.Fatalf("P2P(%d, %d) = %d", g[x], g[y], p)
				}
			}
		}
		n := len(g)
		if n == 0 || n > 64 {
			return
		}
		m := &topology.Model{Source: "fuzz"}
		for i := 0; i < n; i++ {
			m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: -1})
		}
		if err := m.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := Apply(m, r, nil); err == nil {
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
		} else if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error spans lines: %q", err)
		}
	})
}

// HostFigure is the measured copy bandwidth between one CPU agent (a
// NUMA node) and one GPU, in GB/s; 0 means not measured.
type HostFigure struct {
	// CPU is the CPU agent's position among CPU agents, GPU the GPU's
	// among GPU agents.
	CPU, GPU int
	// HostToDevice and DeviceToHost are unidirectional figures.
	HostToDevice, DeviceToHost float64
	// Bidirectional is the bidirectional figure.
	Bidirectional float64
}

// hostFigures returns the host-device figures of r for every CPU-GPU
// pair that has at least one, ordered by CPU and then GPU: what the
// tests check the CPU rows and columns were read into (no user path
// reads them; issue 21 moved this out of the package).
func hostFigures(r *Result) []HostFigure {
	var out []HostFigure
	var cpus []int
	for i, a := range r.Agents {
		if !a.GPU {
			cpus = append(cpus, i)
		}
	}
	for ci, c := range cpus {
		for gi, g := range r.GPUs() {
			f := HostFigure{CPU: ci, GPU: gi}
			f.HostToDevice, _ = r.Uni.At(c, g)
			f.DeviceToHost, _ = r.Uni.At(g, c)
			if v, ok := r.Bi.At(c, g); ok {
				f.Bidirectional = v
			} else if v, ok := r.Bi.At(g, c); ok {
				f.Bidirectional = v
			}
			if f.HostToDevice > 0 || f.DeviceToHost > 0 || f.Bidirectional > 0 {
				out = append(out, f)
			}
		}
	}
	return out
}
