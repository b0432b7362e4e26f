package rbt

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// pcieModel is a finished model of n devices joined by host PCIe links,
// at the given addresses (nil: none).
func pcieModel(t *testing.T, pci ...string) *topology.Model {
	t.Helper()
	m := &topology.Model{Source: "test", Vendor: topology.VendorAMD}
	for i := range pci {
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: -1, PCIAddress: pci[i]})
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}

func collect(ws *[]string) topology.Warner {
	return func(f string, a ...any) { *ws = append(*ws, fmt.Sprintf(f, a...)) }
}

// Every published layout: which agents are GPUs, in what order, and
// what the run says about peer-to-peer access.
func TestVersions(t *testing.T) {
	tests := []struct {
		file     string
		version  string
		agents   int
		gpus     []string // labels of the GPU agents, in order
		pci      []string // their buses, "" when not printed
		p2p      topology.P2P
		uniPair  [2]float64 // GPU 0 -> GPU 1, GPU 1 -> GPU 0; 0 for N/A
		tbLayout bool
	}{
		// 1.x: names only ("Device 67df"); the GPUs are the agents with a
		// self-copy figure. No peer access between the two RX 480s.
		{"rocm-bandwidth-test-v1.0.0-2x-rx480-no-p2p.txt", "1.0.0", 3, []string{"1", "2"}, []string{"", ""}, topology.P2PUnavailable, [2]float64{}, false},
		// 2.0.x: GPU lines carry the bus but no GPU- UUID.
		{"rocm-bandwidth-test-v2.0.1-2x-wx8100-no-p2p.txt", "2.0.1", 3, []string{"1", "2"}, []string{"0d:0.0", "07:0.0"}, topology.P2PUnavailable, [2]float64{}, false},
		{"rocm-bandwidth-test-v2.5.1-radeon-vii-rx6900xt.txt", "2.5.1", 3, []string{"1", "2"}, []string{"0d:0.0", "10:0.0"}, topology.P2PAvailable, [2]float64{47.080, 81.621}, false},
		{"rocm-bandwidth-test-v2.6.0-2x-7900xtx-no-p2p.txt", "2.6.0", 3, []string{"1", "2"}, []string{"83:0.0", "03:0.0"}, topology.P2PUnavailable, [2]float64{}, false},
		// rocm-bandwidth-test 7.x / TransferBench p2p: "GPU 00" labels.
		{"rocm-bandwidth-test-tb-p2p-transferbench-v1.50-2cpu-8gpu.txt", "", 10,
			[]string{"GPU 00", "GPU 01", "GPU 02", "GPU 03", "GPU 04", "GPU 05", "GPU 06", "GPU 07"}, make([]string, 8), topology.P2PAvailable, [2]float64{64.58, 66.52}, true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r := parse(t, public(t, tt.file))
			if len(r.Agents) != tt.agents || r.TransferBench != tt.tbLayout {
				t.Fatalf("%d agents, TransferBench %v", len(r.Agents), r.TransferBench)
			}
			var labels, pci []string
			for _, g := range r.GPUs() {
				labels, pci = append(labels, r.Agents[g].Label), append(pci, r.Agents[g].PCI)
			}
			if fmt.Sprint(labels) != fmt.Sprint(tt.gpus) || fmt.Sprint(pci) != fmt.Sprint(tt.pci) {
				t.Fatalf("GPUs %q at %q, want %q at %q", labels, pci, tt.gpus, tt.pci)
			}
			g := r.GPUs()
			if got := r.P2P(g[0], g[1]); got != tt.p2p {
				t.Errorf("P2P(GPU 0, GPU 1) = %v, want %v", got, tt.p2p)
			}
			a, _ := r.Uni.At(g[0], g[1])
			b, _ := r.Uni.At(g[1], g[0])
			if a != tt.uniPair[0] || b != tt.uniPair[1] {
				t.Errorf("GPU 0 -> 1 = %v, 1 -> 0 = %v; want %v", a, b, tt.uniPair)
			}
		})
	}
}

// A node without peer-to-peer access prints N/A for its GPU pairs: that
// output is valid. The theoretical link is kept, marked P2P unavailable,
// selection counts it host-staged, and one warning says so.
func TestApplyWithoutP2P(t *testing.T) {
	r := parse(t, public(t, "rocm-bandwidth-test-v2.0.1-2x-wx8100-no-p2p.txt"))
	m := pcieModel(t, "0000:07:00.0", "0000:0d:00.0") // bus order: tool device 2 is model device 0
	var warns []string
	if err := Apply(m, r, collect(&warns)); err != nil {
		t.Fatal(err)
	}
	l := m.Link(0, 1)
	if l.P2P != topology.P2PUnavailable || l.Measured || !l.Assumed || l.MaxBandwidth != topology.DefaultHostBandwidth {
		t.Errorf("link %+v, want the theoretical one marked P2P unavailable", *l)
	}
	if got, want := m.BW(0, 1), topology.HostStaged(topology.DefaultHostBandwidth, m.HostBandwidth); got != want {
		t.Errorf("BW = %d, want host-staged %d", got, want)
	}
	want := []string{"rocm_bandwidth_test: no peer-to-peer access between GPU 0-1; copies between them go through host memory (theoretical links kept, marked in amdrun topo)"}
	if fmt.Sprint(warns) != fmt.Sprint(want) {
		t.Errorf("warnings %q\nwant %q", warns, want)
	}
	if m.Bandwidth != "theoretical" {
		t.Errorf("bandwidth %q: nothing was measured between GPUs", m.Bandwidth)
	}

	// The 1.x run names no bus: matched by HIP order.
	r = parse(t, public(t, "rocm-bandwidth-test-v1.0.0-2x-rx480-no-p2p.txt"))
	m = pcieModel(t, "", "")
	if err := Apply(m, r, nil); err != nil || m.Link(0, 1).P2P != topology.P2PUnavailable {
		t.Fatalf("1.0.0: %v, link %+v", err, *m.Link(0, 1))
	}
}

// The row is the copy's source: GPU 0 (Radeon VII) -> GPU 1 (RX 6900 XT)
// is 47.080 GB/s, back 81.621 GB/s.
func TestApplyRadeonVIIRX6900(t *testing.T) {
	r := parse(t, public(t, "rocm-bandwidth-test-v2.5.1-radeon-vii-rx6900xt.txt"))
	m := pcieModel(t, "0000:0d:00.0", "0000:10:00.0")
	c, err := r.Copies(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MBps[0][1] != 47080 || c.MBps[1][0] != 81621 || c.P2P[0][1] != topology.P2PAvailable {
		t.Errorf("copies %v, P2P %v", c.MBps, c.P2P)
	}
	if err := Apply(m, r, nil); err != nil {
		t.Fatal(err)
	}
	if l := m.Link(0, 1); l.MinBandwidth != 47080 || l.MaxBandwidth != 81621 || l.P2P != topology.P2PAvailable || !l.Measured {
		t.Errorf("link %+v", *l)
	}
}

func TestApplyTransferBench(t *testing.T) {
	r := parse(t, public(t, "rocm-bandwidth-test-tb-p2p-transferbench-v1.50-2cpu-8gpu.txt"))
	m := model(t, 8, nil)
	if err := Apply(m, r, nil); err != nil {
		t.Fatal(err)
	}
	// GPU 00 -> GPU 01 64.58, back 66.52; GPU 00 <-> GPU 06 93.91 both ways
	// at once (the bidirectional "<->" row), unidirectional 47.46 / 47.58.
	if l := m.Link(0, 1); l.MinBandwidth != 64580 || l.MaxBandwidth != 66520 {
		t.Errorf("link 0-1 %+v", *l)
	}
	if v, _ := r.Bi.At(r.GPUs()[0], r.GPUs()[6]); v != 93.91 {
		t.Errorf("bidirectional GPU 00 <-> GPU 06 = %v, want 93.91", v)
	}
	if l := m.Link(0, 6); l.MinBandwidth != 47460 || l.MaxBandwidth != 47580 {
		t.Errorf("link 0-6 %+v", *l)
	}
	host := hostFigures(r)
	if len(host) != 16 || host[0] != (HostFigure{CPU: 0, GPU: 0, HostToDevice: 17.32, DeviceToHost: 23.83, Bidirectional: 40.96}) {
		t.Errorf("host figures %d, first %+v", len(host), host[0])
	}
}

// swapColumns swaps the cells of columns a and b (0-based, after the row
// label) in every row of the matrix titled title.
func swapColumns(t *testing.T, in []byte, title string, a, b int) []byte {
	t.Helper()
	lines := strings.Split(string(in), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == title {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no %q", title)
	}
	for i := start + 1; i < len(lines); i++ {
		fs := topology.SplitFields(lines[i])
		if len(fs) == 0 || fs[0].S == "D/D" {
			continue
		}
		if !validLabel(fs[0].S) {
			break
		}
		cells := strings.Fields(lines[i])
		cells[a+1], cells[b+1] = cells[b+1], cells[a+1]
		lines[i] = "          " + strings.Join(cells, "   ")
	}
	return []byte(strings.Join(lines, "\n"))
}

// Swapped columns turn self-copy figures into GPU-GPU links; the checks
// against the access matrix and the diagonal refuse them with one line.
func TestInconsistent(t *testing.T) {
	wx := public(t, "rocm-bandwidth-test-v2.0.1-2x-wx8100-no-p2p.txt")
	archer := public(t, "rocm-bandwidth-test-mi210-4gpu-epyc7543p-archer2.txt")
	vii := public(t, "rocm-bandwidth-test-v2.5.1-radeon-vii-rx6900xt.txt")
	noAccess := func(b []byte) []byte { // drop the access matrix
		i := bytes.Index(b, []byte("Inter-Device Access"))
		j := bytes.Index(b, []byte("Inter-Device Numa Distance"))
		return append(append([]byte{}, b[:i]...), b[j:]...)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"swapped GPU columns against the access matrix", swapColumns(t, wx, "Unidirectional copy peak bandwidth GB/s", 1, 2),
			"rocm_bandwidth_test: line 38, column 27: inconsistent input: Unidirectional copy peak bandwidth GB/s: GPU 1 has no figure to its own memory but has one with 2; a column is out of place"},
		{"swapped GPU columns, no access matrix", swapColumns(t, noAccess(archer), "Unidirectional copy peak bandwidth GB/s", 4, 5),
			"rocm_bandwidth_test: line 45, column 51: inconsistent input: Unidirectional copy peak bandwidth GB/s: 1033.088 GB/s between GPU 4 and 5 beats the GPU's copy to its own memory (42.239 GB/s); a column is out of place"},
		{"swapped CPU and GPU columns", swapColumns(t, wx, "Bdirectional copy peak bandwidth GB/s", 0, 1),
			"rocm_bandwidth_test: line 47, column 15: inconsistent input: Bdirectional copy peak bandwidth GB/s: device 0 against itself has a figure; the tool never measures that, so a column is out of place"},
		{"N/A where the access matrix lets the GPUs reach each other", []byte(strings.NewReplacer(
			"1         1         1         0", "1         1         1         1",
			"2         1         0         1", "2         1         1         1").Replace(string(wx))),
			"rocm_bandwidth_test: line 38, column 45: inconsistent input: Unidirectional copy peak bandwidth GB/s: 1 to 2 is N/A but the access matrix says the two reach each other"},
		{"a figure where the access matrix says no", []byte(strings.Replace(string(vii), "          1         1         1         1         ", "          1         1         1         0         ", 1)),
			"rocm_bandwidth_test: line 38, column 45: inconsistent input: Unidirectional copy peak bandwidth GB/s: 1 to 2 has a figure but the access matrix says 1 cannot reach 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(bytes.NewReader(tt.in))
			if err == nil || err.Error() != tt.want || !errors.Is(err, topology.ErrInconsistent) {
				t.Fatalf("err = %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestApplyWithoutBusSaysSo: a run whose device lines carry no bus (the
// 1.x layout) is matched by HIP's order with one line saying so, where it
// was silent (issue 34); the names it prints are checked against the
// model's when the two share a vocabulary: agreeing names are accepted,
// a GPU matched to a device of another name refuses the run.
func TestApplyWithoutBusSaysSo(t *testing.T) {
	in := public(t, "rocm-bandwidth-test-v1.0.0-2x-rx480-no-p2p.txt")
	var warns []string
	m := pcieModel(t, "0000:03:00.0", "0000:04:00.0")
	if err := Apply(m, parse(t, in), collect(&warns)); err != nil {
		t.Fatal(err)
	}
	want := "rocm_bandwidth_test: its device lines carry no bus address; its 2 GPUs are taken to be the topology's in HIP's device order"
	if len(warns) == 0 || warns[0] != want {
		t.Errorf("warnings %q, want first %q", warns, want)
	}

	named := func(names ...string) *topology.Model {
		m := pcieModel(t, "0000:03:00.0", "0000:04:00.0")
		for i, n := range names {
			m.Devices[i].Name = n
		}
		return m
	}
	if err := Apply(named("Device 67df", "Device 67df"), parse(t, in), nil); err != nil {
		t.Errorf("names agree: %v", err)
	}
	if err := Apply(named("gfx803", "gfx803"), parse(t, in), nil); err != nil {
		t.Errorf("names of another vocabulary are not compared: %v", err)
	}
	err := Apply(named("Device 67df", "Device 6fdf"), parse(t, in), nil)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), `its GPU 1 ("Device 67df") would be device 1 ("Device 6fdf")`) {
		t.Errorf("names disagree: %v, want ErrMismatch naming GPU 1", err)
	}
}
