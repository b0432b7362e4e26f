package nvidiasmi

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// public returns a real fixture from testdata/public (copied there with
// its provenance in testdata/SOURCES.md).
func public(t testing.TB, name string) []byte {
	t.Helper()
	return testutil.ReadFile(t, testutil.Public(t, name))
}

// buildTopo parses a topo -m text and builds a model from it alone.
func buildTopo(t *testing.T, data []byte) (*Topo, *topology.Model) {
	t.Helper()
	topo, err := ParseTopo(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ParseTopo: %v", err)
	}
	m, err := Build(topo, nil, nil, nil, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return topo, m
}

// wantLink checks the type, level, count, directness and hops of a-b.
func wantLink(t *testing.T, m *topology.Model, a, b int, typ topology.LinkType, level string, count int, direct bool, hops int) {
	t.Helper()
	l := m.Link(a, b)
	if l == nil {
		t.Fatalf("no link %d-%d", a, b)
	}
	if l.Type != typ || l.Level != level || l.Count != count || l.Direct != direct || l.Hops != hops {
		t.Errorf("link %d-%d = %s %s count %d direct %v hops %d, want %s %s count %d direct %v hops %d",
			a, b, l.Type, l.Level, l.Count, l.Direct, l.Hops, typ, level, count, direct, hops)
	}
}

func numaOf(m *topology.Model) []int {
	var out []int
	for _, d := range m.Devices {
		out = append(out, d.NUMANode)
	}
	return out
}

func cpus(t *testing.T, s string) []int {
	t.Helper()
	c, err := topology.ParseCPUList(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// allPairs checks every pair has the same level.
func allPairs(t *testing.T, m *topology.Model, typ topology.LinkType, level string, count int, direct bool) {
	t.Helper()
	for a := 0; a < m.N(); a++ {
		for b := a + 1; b < m.N(); b++ {
			l := m.Link(a, b)
			if l.Type != typ || l.Level != level || l.Count != count || l.Direct != direct {
				t.Fatalf("link %d-%d = %s %s x%d direct %v, want %s %s x%d direct %v", a, b, l.Type, l.Level, l.Count, l.Direct, typ, level, count, direct)
			}
		}
	}
}

func TestParseTopoPublic(t *testing.T) {
	tests := []struct {
		file  string
		n     int
		numa  []int
		check func(t *testing.T, topo *Topo, m *topology.Model)
	}{
		{"nvidia-smi-topo-m-dgx-a100-12nic-nv12.txt", 8, []int{3, 3, 1, 1, 7, 7, 5, 5}, func(t *testing.T, topo *Topo, m *topology.Model) {
			allPairs(t, m, topology.LinkNVLink, "NV12", 12, true)
			if got := m.BW(0, 7); got != 12*topology.NVLinkBandwidth {
				t.Errorf("BW(0,7) = %d, want assumed %d", got, 12*topology.NVLinkBandwidth)
			}
			if !reflect.DeepEqual(m.Devices[0].CPUs, cpus(t, "48-63,176-191")) || !reflect.DeepEqual(m.Devices[6].CPUs, cpus(t, "80-95,208-223")) {
				t.Errorf("CPUs of GPU0, GPU6 = %v, %v", m.Devices[0].CPUs, m.Devices[6].CPUs)
			}
			var ids []int
			for _, nn := range m.NUMANodes {
				ids = append(ids, nn.ID)
			}
			if !reflect.DeepEqual(ids, []int{1, 3, 5, 7}) {
				t.Errorf("NUMA node ids %v, want [1 3 5 7]", ids)
			}
			if len(topo.Cells) != 8 || len(topo.Cells[0]) != 8 {
				t.Errorf("NIC rows/columns kept: %dx%d matrix", len(topo.Cells), len(topo.Cells[0]))
			}
		}},
		{"nvidia-smi-topo-m-v100-sxm2-8gpu-dgx1-like-1nic.txt", 8, []int{-1, -1, -1, -1, -1, -1, -1, -1}, func(t *testing.T, topo *Topo, m *topology.Model) {
			wantLink(t, m, 0, 1, topology.LinkNVLink, "NV1", 1, true, 1)
			wantLink(t, m, 0, 3, topology.LinkNVLink, "NV2", 2, true, 1)
			wantLink(t, m, 0, 4, topology.LinkNVLink, "NV2", 2, true, 1)
			wantLink(t, m, 0, 5, topology.LinkPCIe, "SYS", 0, false, 4)
			wantLink(t, m, 3, 7, topology.LinkNVLink, "NV1", 1, true, 1)
			wantLink(t, m, 2, 7, topology.LinkPCIe, "SYS", 0, false, 4)
			if got := m.BW(0, 3); got != 2*topology.NVLinkBandwidth {
				t.Errorf("BW(0,3) = %d", got)
			}
			if l := m.Link(0, 5); l.MaxBandwidth != topology.DefaultHostBandwidth/2 || !l.Assumed {
				t.Errorf("SYS link 0-5 bandwidth %d assumed %v", l.MaxBandwidth, l.Assumed)
			}
			if !reflect.DeepEqual(m.Devices[4].CPUs, cpus(t, "12-23,36-47")) {
				t.Errorf("GPU4 CPUs %v", m.Devices[4].CPUs)
			}
			if len(m.NUMANodes) != 0 {
				t.Errorf("NUMA nodes %v from a file with only CPU Affinity", m.NUMANodes)
			}
		}},
		{"nvidia-smi-topo-m-8gpu-pcie-pxb-pix-sys-2nic-savio4.txt", 8, []int{0, 0, 0, 0, 1, 1, 1, 1}, func(t *testing.T, topo *Topo, m *topology.Model) {
			wantLink(t, m, 2, 3, topology.LinkPCIe, "PIX", 0, true, 1)
			wantLink(t, m, 6, 7, topology.LinkPCIe, "PIX", 0, true, 1)
			wantLink(t, m, 0, 1, topology.LinkPCIe, "PXB", 0, true, 2)
			wantLink(t, m, 0, 4, topology.LinkPCIe, "SYS", 0, false, 4)
			wantLink(t, m, 3, 7, topology.LinkPCIe, "SYS", 0, false, 4)
			if !reflect.DeepEqual(m.Devices[5].CPUs, cpus(t, "16-31")) {
				t.Errorf("GPU5 CPUs %v", m.Devices[5].CPUs)
			}
		}},
		{"nvidia-smi-topo-mp-dgx1-4nic-pcie-only.txt", 8, []int{0, 0, 0, 0, 1, 1, 1, 1}, func(t *testing.T, topo *Topo, m *topology.Model) {
			wantLink(t, m, 0, 1, topology.LinkPCIe, "PIX", 0, true, 1)
			wantLink(t, m, 0, 2, topology.LinkPCIe, "PHB", 0, false, 2)
			wantLink(t, m, 1, 6, topology.LinkPCIe, "SYS", 0, false, 4)
			if !reflect.DeepEqual(m.NUMANode(1).CPUs, cpus(t, "20-39,60-79")) {
				t.Errorf("NUMA node 1 CPUs %v", m.NUMANode(1).CPUs)
			}
		}},
		{"nvidia-smi-topo-m-h100-sxm-8gpu-11nic-ansi-raw.txt", 8, []int{0, 0, 0, 0, 1, 1, 1, 1}, func(t *testing.T, topo *Topo, m *topology.Model) {
			allPairs(t, m, topology.LinkNVLink, "NV18", 18, true)
			if !reflect.DeepEqual(m.Devices[7].CPUs, cpus(t, "56-111,168-223")) {
				t.Errorf("GPU7 CPUs %v", m.Devices[7].CPUs)
			}
			if topo.GPUs[0].GPUNUMAID != -1 {
				t.Errorf("GPU NUMA ID %d, want -1 (N/A)", topo.GPUs[0].GPUNUMAID)
			}
		}},
		{"nvidia-smi-topo-m-h100-4gpu-1numa-0-103-ansi-raw.txt", 4, []int{0, 0, 0, 0}, func(t *testing.T, topo *Topo, m *topology.Model) {
			allPairs(t, m, topology.LinkNVLink, "NV18", 18, true)
			if !reflect.DeepEqual(m.Devices[3].CPUs, cpus(t, "0-103")) {
				t.Errorf("GPU3 CPUs %v", m.Devices[3].CPUs)
			}
		}},
		{"nvidia-smi-topo-m-h100-4gpu-vm-1numa-0-95-ansi-raw.txt", 4, []int{0, 0, 0, 0}, func(t *testing.T, topo *Topo, m *topology.Model) {
			allPairs(t, m, topology.LinkNVLink, "NV18", 18, true)
			if !reflect.DeepEqual(m.NUMANodes, []topology.NUMANode{{ID: 0, CPUs: cpus(t, "0-95")}}) {
				t.Errorf("NUMA nodes %v", m.NUMANodes)
			}
		}},
		{"nvidia-smi-topo-m-h100-sxm-8gpu-nv18-2numa.txt", 8, []int{0, 0, 0, 0, 1, 1, 1, 1}, func(t *testing.T, topo *Topo, m *topology.Model) {
			allPairs(t, m, topology.LinkNVLink, "NV18", 18, true)
			if !reflect.DeepEqual(m.Devices[0].CPUs, cpus(t, "0-51,104-155")) || !reflect.DeepEqual(m.Devices[4].CPUs, cpus(t, "52-103,156-207")) {
				t.Errorf("CPUs %v / %v", m.Devices[0].CPUs, m.Devices[4].CPUs)
			}
		}},
		{"nvidia-smi-topo-m-a100-8gpu-17nic-single-numa.txt", 8, []int{0, 0, 0, 0, 0, 0, 0, 0}, func(t *testing.T, topo *Topo, m *topology.Model) {
			allPairs(t, m, topology.LinkNVLink, "NV12", 12, true)
			if !reflect.DeepEqual(m.Devices[7].CPUs, cpus(t, "0-103")) || topo.GPUs[7].GPUNUMAID != -1 {
				t.Errorf("GPU7 CPUs %v GPU NUMA ID %d", m.Devices[7].CPUs, topo.GPUs[7].GPUNUMAID)
			}
		}},
		{"nvidia-smi-topo-m-a10-4gpu-sys-2nic.txt", 4, []int{0, 0, 0, 0}, func(t *testing.T, topo *Topo, m *topology.Model) {
			allPairs(t, m, topology.LinkPCIe, "SYS", 0, false)
			if !reflect.DeepEqual(m.Devices[2].CPUs, cpus(t, "0-127")) {
				t.Errorf("GPU2 CPUs %v", m.Devices[2].CPUs)
			}
		}},
		{"nvidia-smi-topo-m-2x-gtx1080ti-phb-desktop.txt", 2, []int{-1, -1}, func(t *testing.T, topo *Topo, m *topology.Model) {
			wantLink(t, m, 0, 1, topology.LinkPCIe, "PHB", 0, false, 2)
			if !reflect.DeepEqual(m.Devices[1].CPUs, cpus(t, "0-11")) {
				t.Errorf("GPU1 CPUs %v", m.Devices[1].CPUs)
			}
		}},
		{"nvidia-smi-topo-m-2gpu-nv2-ml-engineering.txt", 2, []int{-1, -1}, func(t *testing.T, topo *Topo, m *topology.Model) {
			wantLink(t, m, 0, 1, topology.LinkNVLink, "NV2", 2, true, 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			topo, m := buildTopo(t, public(t, tt.file))
			if m.N() != tt.n || len(topo.GPUs) != tt.n {
				t.Fatalf("%d devices, want %d", m.N(), tt.n)
			}
			if got := numaOf(m); !reflect.DeepEqual(got, tt.numa) {
				t.Errorf("NUMA nodes %v, want %v", got, tt.numa)
			}
			for i, d := range m.Devices {
				if d.Index != i || d.RuntimeIndex != i || d.Vendor != topology.VendorNVIDIA {
					t.Errorf("device %d: index %d runtime %d vendor %q", i, d.Index, d.RuntimeIndex, d.Vendor)
				}
			}
			if m.Source != "nvidia-smi" {
				t.Errorf("source %q", m.Source)
			}
			tt.check(t, topo, m)
		})
	}
}

// TestParseTopoEveryPublic makes sure every nvidia-smi capture either
// parses or is refused with a one-line ParseError, never a panic.
func TestParseTopoEveryPublic(t *testing.T) {
	files, err := filepath.Glob(testutil.Public(t, "nvidia-smi-*"))
	if err != nil || len(files) < 13 {
		t.Fatalf("found %d nvidia-smi fixtures (%v)", len(files), err)
	}
	refused := map[string]bool{
		"nvidia-smi-topo-p2p-r-h100-8gpu.txt":   true,
		"nvidia-smi-topo-p2p-r-l4-2gpu-cns.txt": true,
	}
	for _, f := range files {
		name := filepath.Base(f)
		data, _ := os.ReadFile(f)
		topo, err := ParseTopo(bytes.NewReader(data))
		if refused[name] {
			var pe *topology.ParseError
			if !errors.As(err, &pe) || !errors.Is(err, topology.ErrWrongTool) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: err = %v, want a one-line ParseError wrapping ErrWrongTool", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := Build(topo, nil, nil, nil, nil); err != nil {
			t.Errorf("%s: Build: %v", name, err)
		}
	}
}

func TestParseTopoErrors(t *testing.T) {
	const hdr = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
	tests := []struct {
		name string
		in   string
		want *topology.ParseError
		msg  string
	}{
		{"empty", "", &topology.ParseError{Source: SourceTopo, Line: 0, Column: 0, Err: topology.ErrEmpty},
			"nvidia-smi topo -m: empty output: no GPU devices found"},
		{"blank lines only", "\n\n  \n", &topology.ParseError{Source: SourceTopo, Line: 0, Column: 0, Err: topology.ErrEmpty},
			"nvidia-smi topo -m: empty output: no GPU devices found"},
		{"rocm-smi output", string(public(t, "rocm-smi-showtopo-mi308x-8gpu.txt")),
			&topology.ParseError{Source: SourceTopo, Line: 1, Column: 0, Err: topology.ErrWrongTool},
			`nvidia-smi topo -m: line 1: not this tool's output: first line "============================ ROCm System..." is not a GPU matrix header`},
		{"p2p output", string(public(t, "nvidia-smi-topo-p2p-r-l4-2gpu-cns.txt")),
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 16, Err: topology.ErrWrongTool},
			"nvidia-smi topo -m: line 2, column 17: not this tool's output: this is `nvidia-smi topo -p2p` output, not `topo -m`: GPU0/GPU1 cell \"CNS\""},
		{"fewer rows than columns", hdr + "GPU0\t X \tNV4\t0-7\t0\n\nLegend:\n",
			&topology.ParseError{Source: SourceTopo, Line: 3, Column: 0, Err: topology.ErrNotSquare},
			"nvidia-smi topo -m: line 3: matrix is not square: 1 GPU rows, the header has 2 GPU columns"},
		{"more rows than columns", hdr + "GPU0\t X \tNV4\t0-7\t0\nGPU1\tNV4\t X \t0-7\t0\nGPU2\tNV4\tNV4\t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 4, Column: 0, Err: topology.ErrNotSquare},
			"nvidia-smi topo -m: line 4: matrix is not square: row GPU2 but the header has 2 GPU columns"},
		{"row with too few cells", hdr + "GPU0\t X \n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 8, Err: topology.ErrNotSquare},
			"nvidia-smi topo -m: line 2, column 9: matrix is not square: row GPU0 has 1 cells, the header has 2 columns"},
		{"rows out of order", hdr + "GPU1\tNV4\t X \t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 0, Err: topology.ErrNotSquare},
			"nvidia-smi topo -m: line 2: matrix is not square: row GPU1 where GPU0 was expected"},
		{"truncated after a row", hdr + "GPU0\t X \tNV4\t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 18, Err: topology.ErrTruncated},
			"nvidia-smi topo -m: line 2, column 19: input ends early: 1 of 2 GPU rows"},
		{"truncated mid-row", hdr + "GPU0\t X \tNV4\t0-7\t0\nGPU1\tNV",
			&topology.ParseError{Source: SourceTopo, Line: 3, Column: 7, Err: topology.ErrTruncated},
			"nvidia-smi topo -m: line 3, column 8: input ends early: row GPU1 has 1 cells, the header has 2 columns"},
		{"header only", hdr, &topology.ParseError{Source: SourceTopo, Line: 1, Column: 37, Err: topology.ErrTruncated},
			"nvidia-smi topo -m: line 1, column 38: input ends early: 0 of 2 GPU rows"},
		{"unknown cell", hdr + "GPU0\t X \tQPI\t0-7\t0\nGPU1\tQPI\t X \t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 9, Err: topology.ErrUnknownLinkType},
			`nvidia-smi topo -m: line 2, column 10: unknown link type: GPU0/GPU1 cell "QPI"`},
		{"NV without a count", hdr + "GPU0\t X \tNV\t0-7\t0\nGPU1\tNV\t X \t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 9, Err: topology.ErrUnknownLinkType},
			`nvidia-smi topo -m: line 2, column 10: unknown link type: GPU0/GPU1 cell "NV"`},
		{"asymmetric", hdr + "GPU0\t X \tNV4\t0-7\t0\nGPU1\tNV2\t X \t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 3, Column: 5, Err: topology.ErrSyntax},
			`nvidia-smi topo -m: line 3, column 6: malformed input: GPU1/GPU0 cell "NV2" differs from GPU0/GPU1 cell "NV4"`},
		{"diagonal not X", hdr + "GPU0\tSYS\tNV4\t0-7\t0\nGPU1\tNV4\t X \t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 5, Err: topology.ErrSyntax},
			`nvidia-smi topo -m: line 2, column 6: malformed input: diagonal cell is not X: GPU0/GPU0 cell "SYS"`},
		{"bad NUMA", hdr + "GPU0\t X \tNV4\t0-7\tzero\nGPU1\tNV4\t X \t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 17, Err: topology.ErrBadNumber},
			`nvidia-smi topo -m: line 2, column 18: not a number: GPU0 NUMA Affinity "zero"`},
		{"bad CPU list", hdr + "GPU0\t X \tNV4\t7-0\t0\nGPU1\tNV4\t X \t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 13, Err: topology.ErrSyntax},
			`nvidia-smi topo -m: line 2, column 14: malformed input: GPU0 CPU Affinity: cpu list "7-0": bad range "7-0"`},
		{"too many affinity cells", hdr + "GPU0\t X \tNV4\t0-7\t0\t1\t2\nGPU1\tNV4\t X \t0-7\t0\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 13, Err: topology.ErrSyntax},
			`nvidia-smi topo -m: line 2, column 14: malformed input: row GPU0: 4 cells after the device columns, the header has 2`},
		// Issue 34: CPU Affinity "0-7" and NUMA Affinity "0" run together
		// read as CPUs 0-70 with NUMA unknown, silent where the host's
		// possible CPUs are unknown.
		{"CPU and NUMA cells run together", hdr + "GPU0\t X \tNV4\t0-70\nGPU1\tNV4\t X \t0-7\t0\n\nLegend:\n",
			&topology.ParseError{Source: SourceTopo, Line: 2, Column: 13, Err: topology.ErrSyntax},
			`nvidia-smi topo -m: line 2, column 14: malformed input: GPU0: CPU Affinity "0-70" beside an empty NUMA Affinity: the cells ran together (nvidia-smi prints a node or N/A there)`},
		{"GPU columns out of order", "\tGPU1\tGPU0\n",
			&topology.ParseError{Source: SourceTopo, Line: 1, Column: 1, Err: topology.ErrSyntax},
			"nvidia-smi topo -m: line 1, column 2: malformed input: column GPU1 where GPU0 was expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := ParseTopo(strings.NewReader(tt.in))
			checkParseError(t, topo, err, tt.want, tt.msg)
		})
	}
}

// checkParseError compares err with a complete expected ParseError: the
// same Source, Line and Column, an Err that errors.Is the expected
// sentinel, and the exact message.
func checkParseError(t *testing.T, got any, err error, want *topology.ParseError, msg string) {
	t.Helper()
	var pe *topology.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, %v; want %#v", got, err, want)
	}
	if pe.Source != want.Source || pe.Line != want.Line || pe.Column != want.Column || !errors.Is(pe, want.Err) {
		t.Errorf("got %#v (%v)\nwant %#v (%v)", *pe, pe.Err, *want, want.Err)
	}
	if err.Error() != msg {
		t.Errorf("message\n got %s\nwant %s", err.Error(), msg)
	}
}

func TestParseTopoVariants(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Topo
	}{
		{"no leading tab, CRLF, ANSI, no final newline after the matrix",
			"\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\r\nGPU0\t X \tSOC\t0-3\t0\t\t2\r\nGPU1\tSOC\t X \t4-7\t1\t\tN/A\r\n\r\nLegend:",
			Topo{GPUs: []TopoGPU{{[]int{0, 1, 2, 3}, 0, 2}, {[]int{4, 5, 6, 7}, 1, -1}}, Cells: [][]string{{"X", "SOC"}, {"SOC", "X"}}}},
		{"empty CPU affinity with tabs",
			"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\t\t0\t\tN/A\nGPU1\tNV18\t X \t\t1\t\tN/A\n",
			Topo{GPUs: []TopoGPU{{nil, 0, -1}, {nil, 1, -1}}, Cells: [][]string{{"X", "NV18"}, {"NV18", "X"}}}},
		{"empty CPU affinity with expanded tabs",
			"        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID\nGPU0     X      NV18                    0               N/A\nGPU1    NV18     X                      1               N/A\n",
			Topo{GPUs: []TopoGPU{{nil, 0, -1}, {nil, 1, -1}}, Cells: [][]string{{"X", "NV18"}, {"NV18", "X"}}}},
		{"no affinity columns, 7-char NIC name",
			"GPU0 GPU1 mlx5_10 \nGPU0 X PHB SYS\nGPU1 PHB X SYS\nmlx5_10 SYS SYS X\n",
			Topo{GPUs: []TopoGPU{{nil, -1, -1}, {nil, -1, -1}}, Cells: [][]string{{"X", "PHB"}, {"PHB", "X"}}}},
		{"one GPU", "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\tN/A\n",
			Topo{GPUs: []TopoGPU{{cpusN(16), -1, -1}}, Cells: [][]string{{"X"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTopo(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func cpusN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestParseP2P(t *testing.T) {
	p, err := ParseP2P(bytes.NewReader(public(t, "nvidia-smi-topo-p2p-r-h100-8gpu.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status) != 8 || p.Status[0][7] != "OK" || p.Status[5][2] != "OK" || p.Status[4][4] != "X" {
		t.Errorf("h100 p2p = %v", p.Status)
	}
	p, err = ParseP2P(bytes.NewReader(public(t, "nvidia-smi-topo-p2p-r-l4-2gpu-cns.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if p.Status[0][1] != "CNS" || p.Status[1][0] != "CNS" {
		t.Errorf("l4 p2p = %v", p.Status)
	}
	// Captured on the lent H200 (driver 580.159.04): the header wrapped in
	// ANSI underline escapes, rows indented by a space, cells tab-ended.
	p, err = ParseP2P(bytes.NewReader(testutil.ReadFile(t, testutil.Testdata(t, "nvidia-smi", "h200x1-real.topo-p2p-r.txt"))))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Status, [][]string{{"X"}}) {
		t.Errorf("h200 p2p = %q", p.Status)
	}
	_, err = ParseP2P(bytes.NewReader(public(t, "nvidia-smi-topo-m-2gpu-nv2-ml-engineering.txt")))
	checkParseError(t, nil, err, &topology.ParseError{Source: SourceP2P, Line: 2, Column: 16, Err: topology.ErrWrongTool},
		"nvidia-smi topo -p2p: line 2, column 17: not this tool's output: this is `nvidia-smi topo -m` output, not `topo -p2p`: GPU0/GPU1 cell \"NV2\"")
}

// TestParseTopoRunTogetherAffinityReal: the real 2 x H200 capture with
// GPU1's CPU Affinity "0-31" and NUMA Affinity "0" run together
// ("0-310\t\tN/A", the separator lost) is refused naming the row, where
// it was read as CPUs 0-310 on an unknown NUMA node (issue 34).
func TestParseTopoRunTogetherAffinityReal(t *testing.T) {
	in := string(testutil.ReadFile(t, testutil.Testdata(t, "nvidia-smi", "h200x2-real.topo-m.txt")))
	if _, err := ParseTopo(strings.NewReader(in)); err != nil {
		t.Fatalf("the capture itself: %v", err)
	}
	bad := strings.Replace(in, "GPU1\tNV18\t X \t0-31\t0\t\tN/A", "GPU1\tNV18\t X \t0-310\t\tN/A", 1)
	if bad == in {
		t.Fatal("capture changed: GPU1's row not found")
	}
	_, err := ParseTopo(strings.NewReader(bad))
	if !errors.Is(err, topology.ErrSyntax) || !strings.Contains(err.Error(), `line 3`) || !strings.Contains(err.Error(), `GPU1: CPU Affinity "0-310" beside an empty NUMA Affinity`) {
		t.Errorf("got %v, want a refusal naming GPU1's row (line 3)", err)
	}
	// The same without the empty cell nvidia-smi prints before GPU NUMA ID:
	// N/A moves into NUMA Affinity and GPU NUMA ID is the empty one.
	bad = strings.Replace(in, "GPU1\tNV18\t X \t0-31\t0\t\tN/A", "GPU1\tNV18\t X \t0-310\tN/A", 1)
	_, err = ParseTopo(strings.NewReader(bad))
	if !errors.Is(err, topology.ErrSyntax) || !strings.Contains(err.Error(), `GPU1: CPU Affinity "0-310" beside an empty GPU NUMA ID`) {
		t.Errorf("got %v, want a refusal naming GPU1 and GPU NUMA ID", err)
	}
}
