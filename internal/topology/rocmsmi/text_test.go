package rocmsmi

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// TestPublicFixtures runs every shared capture through the parser for its
// kind: rocm-smi output must parse into a valid model; every other tool's
// output must be refused as not rocm-smi's.
func TestPublicFixtures(t *testing.T) {
	wantDevices := map[string]int{
		"rocm-smi-concise-dieedge-mi250-8gcd.txt":                       8,
		"rocm-smi-concise-legacy-mi210-4gpu-archer2.txt":                4,
		"rocm-smi-concise-mi300x-4gpu-sriov.txt":                        4,
		"rocm-smi-concise-mi308x-8gpu.txt":                              8,
		"rocm-smi-showallinfo-mi300x-4gpu-sriov.txt":                    4,
		"rocm-smi-shownodesbw-8gpu-fullmesh-xgmi.txt":                   8,
		"rocm-smi-shownodesbw-8gpu-partial-xgmi-rocm-release-notes.txt": 8,
		"rocm-smi-shownodesbw-mi250-8gcd.txt":                           8,
		"rocm-smi-showtopo-mi210-4gpu-xgmi-nps4-archer2.txt":            4,
		"rocm-smi-showtopo-mi300a-4apu.txt":                             4,
		"rocm-smi-showtopo-mi308x-8gpu.txt":                             8,
		"rocm-smi-showtopo-mi300x-tpx-broken-12-partitions.txt":         12,
		"rocm-smi-showtopoaccess-2gpu-rocm-release-notes.txt":           2,
		"rocm-smi-showtoponuma-mi250-8gcd-2numa.txt":                    8,
		"rocm-smi-showuse-mi210-4gpu-archer2.txt":                       4,
		"rocm-smi-u-showmeminfo-vram-mi308x-8gpu.txt":                   8,
	}
	files, err := filepath.Glob(public(t, "*"))
	if err != nil || len(files) < 40 {
		t.Fatalf("public captures in testdata: %d files, %v", len(files), err)
	}
	seen := 0
	for _, path := range files {
		name := filepath.Base(path)
		if name == "SOURCES.md" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			r, err := parseFile(t, path)
			want, isRocm := wantDevices[name]
			if !isRocm {
				var pe *topology.ParseError
				if !errors.As(err, &pe) || !errors.Is(err, topology.ErrWrongTool) {
					t.Fatalf("err = %v, want a *ParseError wrapping ErrWrongTool", err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			seen++
			if err != nil {
				t.Fatal(err)
			}
			m, _ := mustModel(t, r)
			if m.N() != want {
				t.Errorf("%d devices, want %d", m.N(), want)
			}
			if m.Source != "rocm-smi" || m.Vendor != topology.VendorAMD {
				t.Errorf("source %q vendor %q", m.Source, m.Vendor)
			}
			for i, d := range m.Devices {
				if d.Index != i || d.RuntimeIndex != i {
					t.Errorf("device %d: index %d runtime %d", i, d.Index, d.RuntimeIndex)
				}
			}
		})
	}
	if seen != len(wantDevices) {
		t.Errorf("saw %d rocm-smi fixtures, want %d", seen, len(wantDevices))
	}
}

// The seed document's MI250 node: as the seed prints it (whitespace
// collapsed) and as rocm-smi prints it (the three padded captures).
func TestSeedMI250(t *testing.T) {
	for name, r := range map[string]*Report{
		"collapsed": mustReport(t, mine(t, "mi250-seed-collapsed.txt")),
		"padded": mustReport(t, "rocm-smi-concise-dieedge-mi250-8gcd.txt",
			"rocm-smi-shownodesbw-mi250-8gcd.txt", "rocm-smi-showtoponuma-mi250-8gcd-2numa.txt"),
	} {
		t.Run(name, func(t *testing.T) {
			m, _ := mustModel(t, r)
			if m.N() != 8 {
				t.Fatalf("%d devices", m.N())
			}
			wantLink(t, m, 0, 1, topology.LinkXGMI, true, 50000, 200000)
			wantLink(t, m, 0, 6, topology.LinkXGMI, true, 50000, 100000)
			wantLink(t, m, 0, 2, topology.LinkXGMI, true, 50000, 50000)
			wantLink(t, m, 6, 7, topology.LinkXGMI, true, 50000, 200000)
			if l := m.Link(0, 3); l.Direct || l.Type != topology.LinkPCIe || !l.Assumed {
				t.Errorf("0-3 = %+v, want PCIe through the host, bandwidth assumed", *l)
			}
			if l := m.Link(0, 1); l.Assumed {
				t.Errorf("0-1 bandwidth marked assumed")
			}
			if got, want := numaOf(m), []int{0, 0, 0, 0, 1, 1, 1, 1}; !reflect.DeepEqual(got, want) {
				t.Errorf("NUMA %v, want %v", got, want)
			}
			if got, want := m.Packages(), [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}; !reflect.DeepEqual(got, want) {
				t.Errorf("packages %v, want %v", got, want)
			}
			if d0, d1 := m.Devices[0], m.Devices[1]; d0.Package != "pkg0" || d1.Package != "pkg0" || d0.Partition != 0 || d1.Partition != 1 {
				t.Errorf("devices 0/1 package %q/%q partition %d/%d", d0.Package, d1.Package, d0.Partition, d1.Partition)
			}
			if m.Devices[7].Package != "pkg3" {
				t.Errorf("device 7 package %q", m.Devices[7].Package)
			}
			for _, d := range m.Devices {
				if d.Busy {
					t.Errorf("device %d busy: %s", d.Index, d.BusyReason)
				}
			}
		})
	}
}

func TestShowtopoMI308X(t *testing.T) {
	r := mustReport(t, "rocm-smi-showtopo-mi308x-8gpu.txt")
	if want := []string{"hops between two gpus", "link type between two gpus", "numa nodes", "weight between two gpus"}; !reflect.DeepEqual(listed(r), want) {
		t.Errorf("sections %v, want %v", listed(r), want)
	}
	m, warns := mustModel(t, r)
	if len(warns) != 0 {
		t.Errorf("warnings %q", warns)
	}
	if m.N() != 8 || len(m.Links) != 28 {
		t.Fatalf("%d devices %d links", m.N(), len(m.Links))
	}
	for _, l := range m.Links {
		if l.Weight != 15 || l.Hops != 1 || l.Type != topology.LinkXGMI || !l.Direct || l.MaxBandwidth != topology.XGMILinkBandwidth || !l.Assumed {
			t.Errorf("link %d-%d = %+v", l.A, l.B, l)
		}
	}
	if got, want := numaOf(m), []int{0, 0, 0, 0, 1, 1, 1, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("NUMA %v, want %v", got, want)
	}
}

func TestShowtopoVariants(t *testing.T) {
	for _, tc := range []struct {
		file string
		numa []int
	}{
		// Real tabs and trailing spaces after every cell.
		{"rocm-smi-showtopo-mi300a-4apu.txt", []int{0, 1, 2, 3}},
		// 80-column banner, "GPU 0          :" labels, NPS4.
		{"rocm-smi-showtopo-mi210-4gpu-xgmi-nps4-archer2.txt", []int{0, 1, 2, 3}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, _ := mustModel(t, mustReport(t, tc.file))
			if got := numaOf(m); !reflect.DeepEqual(got, tc.numa) {
				t.Errorf("NUMA %v, want %v", got, tc.numa)
			}
			for _, l := range m.Links {
				if l.Type != topology.LinkXGMI || l.Weight != 15 || l.Hops != 1 || !l.Direct {
					t.Errorf("link %d-%d = %+v", l.A, l.B, l)
				}
			}
		})
	}
}

func TestARCHER2MI210(t *testing.T) {
	r := mustReport(t, "rocm-smi-showtopo-mi210-4gpu-xgmi-nps4-archer2.txt",
		"rocm-smi-concise-legacy-mi210-4gpu-archer2.txt", "rocm-smi-showuse-mi210-4gpu-archer2.txt")
	m, _ := mustModel(t, r)
	if m.N() != 4 || len(m.Packages()) != 4 {
		t.Fatalf("%d devices in %d packages", m.N(), len(m.Packages()))
	}
	for _, d := range m.Devices {
		if d.Package != "" || d.UtilPercent != 0 || d.Busy || d.NUMANode != d.Index {
			t.Errorf("device %d = %+v", d.Index, d)
		}
	}
	d := r.Devices[3]
	if !d.InConcise || d.SecondDie || d.UtilPercent != 0 || d.MemUsedPct != 0 {
		t.Errorf("report device 3 = %+v", *d)
	}
}

func TestHandMadeNodes(t *testing.T) {
	t.Run("mi210 two hives", func(t *testing.T) {
		m, _ := mustModel(t, mustReport(t, mine(t, "mi210-8gpu-2hive-showtopo-nodesbw.txt")))
		wantLink(t, m, 0, 3, topology.LinkXGMI, true, 50000, 50000)
		wantLink(t, m, 4, 7, topology.LinkXGMI, true, 50000, 50000)
		wantLink(t, m, 0, 4, topology.LinkPCIe, false, topology.DefaultHostBandwidth/2, topology.DefaultHostBandwidth/2)
		if l := m.Link(3, 5); l.Weight != 72 || l.Hops != 3 || l.Level != topology.LevelSYS || !l.Assumed {
			t.Errorf("3-5 = %+v", *l)
		}
		if l := m.Link(1, 2); l.Weight != 15 || l.Hops != 1 || l.Assumed {
			t.Errorf("1-2 = %+v", *l)
		}
		if got, want := numaOf(m), []int{0, 0, 0, 0, 1, 1, 1, 1}; !reflect.DeepEqual(got, want) {
			t.Errorf("NUMA %v, want %v", got, want)
		}
	})
	t.Run("pcie 4 gpus 2 sockets", func(t *testing.T) {
		m, _ := mustModel(t, mustReport(t, mine(t, "pcie-4gpu-2socket-showtopo-nodesbw.txt")))
		for _, l := range m.Links {
			if l.Type != topology.LinkPCIe || l.Direct || !l.Assumed {
				t.Errorf("link %d-%d = %+v", l.A, l.B, l)
			}
		}
		if l := m.Link(0, 1); l.Level != topology.LevelPHB || l.Weight != 40 || l.Hops != 2 || l.MaxBandwidth != topology.DefaultHostBandwidth {
			t.Errorf("0-1 = %+v", *l)
		}
		if l := m.Link(1, 2); l.Level != topology.LevelSYS || l.Weight != 72 || l.MaxBandwidth != topology.DefaultHostBandwidth/2 {
			t.Errorf("1-2 = %+v", *l)
		}
	})
	t.Run("mi300x spx", func(t *testing.T) {
		m, _ := mustModel(t, mustReport(t, mine(t, "mi300x-8gpu-spx-showtopo-nodesbw.txt")))
		for _, l := range m.Links {
			if l.Type != topology.LinkXGMI || !l.Direct || l.MaxBandwidth != 50000 || l.Assumed || l.Weight != 15 {
				t.Errorf("link %d-%d = %+v", l.A, l.B, l)
			}
		}
	})
}

func TestIdentityAndLoad(t *testing.T) {
	t.Run("showallinfo", func(t *testing.T) {
		r := mustReport(t, "rocm-smi-showallinfo-mi300x-4gpu-sriov.txt")
		m, _ := mustModel(t, r)
		d := m.Devices[0]
		if d.PCIAddress != "0000:26:00.0" || d.UniqueID != "0x8d1457e2c20f59d2" || d.Name != "AMD Instinct MI300X OAM" || d.Busy {
			t.Errorf("device 0 = %+v", d)
		}
		if got := m.Devices[3].UniqueID; got != "0xeff71edc82169115" {
			t.Errorf("device 3 unique id %q", got)
		}
	})
	t.Run("meminfo vram", func(t *testing.T) {
		m, _ := mustModel(t, mustReport(t, "rocm-smi-u-showmeminfo-vram-mi308x-8gpu.txt"))
		d := m.Devices[7]
		if d.MemTotalMiB != 206141652992>>20 || d.MemUsedMiB != 297623552>>20 || d.Busy {
			t.Errorf("device 7 = %+v", d)
		}
	})
	t.Run("concise rocm 6.0", func(t *testing.T) {
		r := mustReport(t, "rocm-smi-concise-mi300x-4gpu-sriov.txt")
		m, _ := mustModel(t, r)
		for _, d := range m.Devices {
			if d.Name != "AMD Instinct MI300X" || d.Package != "" {
				t.Errorf("device %d = %+v", d.Index, d)
			}
		}
	})
	t.Run("concise rocm 6.2", func(t *testing.T) {
		r := mustReport(t, "rocm-smi-concise-mi308x-8gpu.txt")
		for i := 0; i < 8; i++ {
			if d := r.Devices[i]; d == nil || !d.InConcise || d.SecondDie || d.MemUsedPct != 0 || d.UtilPercent != 0 {
				t.Errorf("device %d = %+v", i, d)
			}
		}
	})
}

// A busy concise row is read: VRAM% and GPU% reach the model.
func TestConciseBusy(t *testing.T) {
	in := "====== Concise Info ======\n" +
		"GPU  Temp   AvgPwr  SCLK    MCLK     Fan  Perf  PwrCap  VRAM%  GPU%\n" +
		"0    28.0c  43.0W   800Mhz  1600Mhz  0%   auto  300.0W    0%   0%\n" +
		"1    30.0c  243.0W  1700Mhz 1600Mhz  0%   auto  300.0W   87%  100%\n" +
		"==========================\n"
	r, err := ParseText(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := mustModel(t, r)
	if d := m.Devices[1]; !d.Busy || d.MemUsedPct != 87 || d.UtilPercent != 100 {
		t.Errorf("device 1 = %+v", d)
	}
	if m.Devices[0].Busy {
		t.Error("device 0 busy")
	}
}

// Several sections in one input, in any order, with the noise newer
// rocm-smi prints around them.
func TestSeveralSectionsOneInput(t *testing.T) {
	var b strings.Builder
	for _, f := range []string{"rocm-smi-showtoponuma-mi250-8gcd-2numa.txt", "rocm-smi-u-showmeminfo-vram-mi308x-8gpu.txt",
		"rocm-smi-shownodesbw-mi250-8gcd.txt", "rocm-smi-concise-dieedge-mi250-8gcd.txt"} {
		b.Write(testutil.ReadFile(t, public(t, f)))
		b.WriteString("WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status\n\n")
	}
	r, err := ParseText(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"% time gpu is busy", "bandwidth", "concise info", "memory usage (bytes)", "numa nodes"}
	if !reflect.DeepEqual(listed(r), want) {
		t.Errorf("sections %v, want %v", listed(r), want)
	}
	m, _ := mustModel(t, r)
	wantLink(t, m, 0, 1, topology.LinkXGMI, true, 50000, 200000)
	if m.Devices[5].Package != "pkg2" || m.Devices[5].MemTotalMiB != 206141652992>>20 || m.Devices[5].NUMANode != 1 {
		t.Errorf("device 5 = %+v", m.Devices[5])
	}
}

func TestVersionLine(t *testing.T) {
	r, err := ParseText(strings.NewReader("ROCM-SMI version: 3.0.0+03a4530\nROCM-SMI-LIB version: 7.5.0\n"))
	if err != nil || r.Version != "3.0.0+03a4530" {
		t.Fatalf("version %q, %v", r.Version, err)
	}
}

// An asymmetric link type matrix is a warning, not an error; with no
// weight or hops to decide, the pair is PCIe, whichever row says XGMI.
func TestNotes(t *testing.T) {
	for _, rows := range [][2]string{{"0     XGMI", "PCIE  0"}, {"0     PCIE", "XGMI  0"}} {
		in := "==== Link Type between two GPUs ====\n" +
			"       GPU0  GPU1\n" +
			"GPU0   " + rows[0] + "\n" +
			"GPU1   " + rows[1] + "\n"
		r, err := ParseText(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		m, warns := mustModel(t, r)
		want := "rocm-smi: GPU0-GPU1: link type PCIE one way and XGMI the other, and no weight or hops; assuming PCIE"
		if len(warns) == 0 || warns[0] != want {
			t.Errorf("warnings %q, want first %q", warns, want)
		}
		if l := m.Link(0, 1); l.Type != topology.LinkPCIe || l.Direct {
			t.Errorf("rows %q: link %+v, want PCIe", rows, *l)
		}
	}
}

// The 4 x MI100 case of issue 24: GPU0-GPU1 reads XGMI one way and PCIE
// the other, and its weight 72 and hops 3 say PCIe. Either row order
// gives PCIe with one warning; before the shared rule the first reading
// won (XGMI at 50 GB/s in one order, PCIe in the other).
func TestLinkTypeConflictMI100BothOrders(t *testing.T) {
	matrix := func(title string, cell func(r, c int) string) string {
		s := "==== " + title + " ====\n       GPU0  GPU1  GPU2  GPU3\n"
		for r := 0; r < 4; r++ {
			s += fmt.Sprintf("GPU%d", r)
			for c := 0; c < 4; c++ {
				s += "   " + cell(r, c)
			}
			s += "\n"
		}
		return s
	}
	count := func(v string) func(r, c int) string {
		return func(r, c int) string {
			if r == c {
				return "0"
			}
			return v
		}
	}
	for _, xgmiAt := range [][2]int{{0, 1}, {1, 0}} {
		in := matrix("Weight between two GPUs", count("72")) +
			matrix("Hops between two GPUs", count("3")) +
			matrix("Link Type between two GPUs", func(r, c int) string {
				switch {
				case r == c:
					return "0"
				case r == xgmiAt[0] && c == xgmiAt[1]:
					return "XGMI"
				}
				return "PCIE"
			})
		r, err := ParseText(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		m, warns := mustModel(t, r)
		l := m.Link(0, 1)
		if l.Type != topology.LinkPCIe || l.Direct || l.MaxBandwidth >= topology.XGMILinkBandwidth {
			t.Errorf("XGMI at row %d: link %+v, want PCIe", xgmiAt[0], *l)
		}
		want := "rocm-smi: GPU0-GPU1: link type PCIE one way and XGMI the other; weight 72 and hops 3 say PCIE"
		n := 0
		for _, w := range warns {
			if strings.Contains(w, "link type") {
				n++
				if w != want {
					t.Errorf("warning %q, want %q", w, want)
				}
			}
		}
		if n != 1 {
			t.Errorf("XGMI at row %d: %d link-type warnings in %q, want 1", xgmiAt[0], n, warns)
		}
	}
}

// A Weight or Hops matrix is symmetric with 0 on its diagonal: one row out
// of place (here GPU1's cells shifted) turned a pair into a host link and
// gave a weight of 0; now it is refused with one line.
func TestWeightHopsChecked(t *testing.T) {
	for _, tc := range []struct{ name, in, msg string }{
		{"asymmetric weight", "==== Weight between two GPUs ====\n       GPU0  GPU1\nGPU0   0     15\nGPU1   30    0\n",
			"rocm-smi --showtopo: line 4, column 8: inconsistent input: GPU1-GPU0 weight is 30 but GPU0-GPU1 is 15; a row or column is out of place"},
		{"shifted row", "==== Hops between two GPUs ====\n       GPU0  GPU1  GPU2\nGPU0   0     1     3\nGPU1   0     1     3\nGPU2   3     3     0\n",
			"rocm-smi --showtopo: line 4, column 14: inconsistent input: GPU1's hops to itself is 1, not 0; a row or column is out of place"},
		{"diagonal not 0", "==== Weight between two GPUs ====\n       GPU0  GPU1\nGPU0   15    0\nGPU1   0     15\n",
			"rocm-smi --showtopo: line 3, column 8: inconsistent input: GPU0's weight to itself is 15, not 0; a row or column is out of place"},
	} {
		_, err := ParseText(strings.NewReader(tc.in))
		if err == nil || err.Error() != tc.msg || !errors.Is(err, topology.ErrInconsistent) {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.msg)
		}
	}
}

// rocm-smi on an MI300 in TPX mode (rocm_smi_lib 6.1.0 changelog): tool
// error lines inside the Weight section, link types under the Weight
// title, XXXX for unreadable cells. What is readable is read, each kind
// of oddity is one warning, and XXXX pairs are assumed (marked *), not
// read as host links silently.
func TestBrokenMI300Partitions(t *testing.T) {
	r := mustReport(t, "rocm-smi-showtopo-mi300x-tpx-broken-12-partitions.txt")
	m, warns := mustModel(t, r)
	if m.N() != 12 {
		t.Fatalf("%d devices", m.N())
	}
	want := []string{
		`rocm-smi: skipped 2 tool error line(s) inside its tables (first: "get_link_weight_topology, Not supported on the given system")`,
		`rocm-smi: the "weight between two gpus" section holds link types, not numbers (rocm-smi on a partitioned MI300); read as link types`,
		"rocm-smi: 12 GPU pair(s) read XXXX (unreadable): GPU1-GPU2, GPU1-GPU3, GPU1-GPU4, GPU2-GPU3, GPU2-GPU4, GPU3-GPU4, GPU5-GPU6, GPU5-GPU7 and 4 more; their links are unknown and assumed through the host (marked * in amdrun topo)",
		"rocm-smi: Numa Node differs from Numa Affinity for GPU[2] 0 vs 1, GPU[3] 0 vs 2, GPU[4] 0 vs 3, GPU[6] 0 vs 1, GPU[7] 0 vs 2, GPU[8] 0 vs 3; using the affinity",
	}
	if !reflect.DeepEqual(warns, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warns, "\n"), strings.Join(want, "\n"))
	}
	wantLink(t, m, 0, 1, topology.LinkXGMI, true, topology.XGMILinkBandwidth, topology.XGMILinkBandwidth)
	if l := m.Link(0, 1); !l.Assumed {
		t.Errorf("XGMI link without a figure not marked assumed: %+v", *l)
	}
	if l := m.Link(1, 2); l.Type != topology.LinkPCIe || l.Direct || !l.Assumed {
		t.Errorf("XXXX pair 1-2 = %+v, want an assumed host link", *l)
	}
	if got := numaOf(m); !reflect.DeepEqual(got, []int{0, 0, 1, 2, 3, 0, 1, 2, 3, 1, 2, 3}) {
		t.Errorf("NUMA %v", got)
	}
}

// rocm-smi -d 2 3 prints only GPU2 and GPU3: devices are renumbered by
// position and keep their rocm-smi index as RuntimeIndex.
func TestSubsetRenumbered(t *testing.T) {
	in := "==== Link Type between two GPUs ====\n" +
		"       GPU2  GPU3\n" +
		"GPU2   0     XGMI\n" +
		"GPU3   XGMI  0\n"
	r, err := ParseText(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	m, warns := mustModel(t, r)
	if m.N() != 2 || m.Devices[0].RuntimeIndex != 2 || m.Devices[1].RuntimeIndex != 3 || len(warns) != 1 {
		t.Errorf("devices %+v warnings %q", m.Devices, warns)
	}
}

func TestParseTextErrors(t *testing.T) {
	nvidia := string(testutil.ReadFile(t, public(t, "nvidia-smi-topo-m-h100-sxm-8gpu-nv18-2numa.txt")))
	bw := "\n\n==== ROCm System Management Interface ====\n" + // lines 1-3
		"==== Bandwidth ====\n" + // 4
		"       GPU0         GPU1         GPU2\n" + // 5
		"GPU0   N/A          50000-50000  0-0\n" // 6
	for _, tc := range []struct {
		name string
		in   string
		want *topology.ParseError
		msg  string
	}{
		{
			name: "row short of columns",
			in:   bw + "GPU1   50000-50000  N/A\n",
			want: &topology.ParseError{Source: "rocm-smi --shownodesbw", Line: 7, Column: 23,
				Err: wrap(topology.ErrNotSquare, "2 cells in row GPU1 for 3 columns")},
			msg: "rocm-smi --shownodesbw: line 7, column 24: matrix is not square: 2 cells in row GPU1 for 3 columns",
		},
		{
			name: "fewer rows than columns",
			in:   bw + "GPU1   50000-50000  N/A          0-0\nFormat: min-max; Units: mps\n",
			want: &topology.ParseError{Source: "rocm-smi --shownodesbw", Line: 8, Column: 0,
				Err: wrap(topology.ErrNotSquare, "2 rows for 3 columns")},
		},
		{
			name: "truncated",
			in:   bw + "GPU1   50000-50000  N/A          0-0\n",
			want: &topology.ParseError{Source: "rocm-smi --shownodesbw", Line: 7, Column: 0,
				Err: wrap(topology.ErrTruncated, "2 of 3 rows")},
		},
		{
			name: "non-numeric bandwidth",
			in:   bw + "GPU1   50000-50000  N/A          0-0\nGPU2   0-0          0-x          N/A\n",
			want: &topology.ParseError{Source: "rocm-smi --shownodesbw", Line: 8, Column: 20,
				Err: wrap(topology.ErrBadNumber, `bandwidth "0-x"`)},
		},
		{
			name: "non-numeric weight",
			in:   "==== Weight between two GPUs ====\n       GPU0  GPU1\nGPU0   0     fifteen\nGPU1   15    0\n",
			want: &topology.ParseError{Source: "rocm-smi --showtopo", Line: 3, Column: 13,
				Err: wrap(topology.ErrBadNumber, `"fifteen"`)},
		},
		{
			name: "unknown link type",
			in:   "==== Link Type between two GPUs ====\n       GPU0    GPU1\nGPU0   0       NVLINK\nGPU1   NVLINK  0\n",
			want: &topology.ParseError{Source: "rocm-smi --showtopo", Line: 3, Column: 15,
				Err: wrap(topology.ErrUnknownLinkType, `"NVLINK"`)},
			msg: `rocm-smi --showtopo: line 3, column 16: unknown link type: "NVLINK"`,
		},
		{
			name: "more rows than columns",
			in:   "==== Hops between two GPUs ====\n       GPU0  GPU1\nGPU0   0     1\nGPU1   1     0\nGPU2   1     1\n",
			want: &topology.ParseError{Source: "rocm-smi --showtopo", Line: 5, Column: 0,
				Err: wrap(topology.ErrNotSquare, "more rows than the 2 columns")},
		},
		{
			name: "header not GPUn",
			in:   "==== Hops between two GPUs ====\n       GPU0  CPU1\nGPU0   0     1\n",
			want: &topology.ParseError{Source: "rocm-smi --showtopo", Line: 2, Column: 13,
				Err: wrap(topology.ErrSyntax, `column header "CPU1" is not GPUn`)},
		},
		{
			name: "bad numa node",
			in:   "==== Numa Nodes ====\nGPU[0]\t\t: (Topology) Numa Node: zero\n",
			want: &topology.ParseError{Source: "rocm-smi --showtoponuma", Line: 2, Column: 32,
				Err: wrap(topology.ErrBadNumber, `numa node "zero"`)},
		},
		{
			name: "bad concise percentage",
			in:   "==== Concise Info ====\nGPU  Temp   AvgPwr  SCLK    MCLK     Fan  Perf  PwrCap  VRAM%  GPU%\n0    28.0c  43.0W   800Mhz  1600Mhz  0%   auto  300.0W  lots   0%\n",
			want: &topology.ParseError{Source: "rocm-smi concise table", Line: 3, Column: 56,
				Err: wrap(topology.ErrBadNumber, `percentage "lots"`)},
		},
		// Line numbers across the places where the reader hands a line
		// back or looks past blank lines (issue 21: rocmsmi reads through
		// topology.LineReader): an off-by-one in any of them moves these.
		{
			name: "section after a table-less one",
			in: "==== Weight between two GPUs ====\r\n" + // 1: no table, the banner below is handed back
				"WARNING: one\r\n" + // 2
				"==== Numa Nodes ====\r\n" + // 3
				"GPU[0]\t\t: (Topology) Numa Node: 0\r\n" + // 4
				"GPU[1]\t\t: (Topology) Numa Node: x1\r\n", // 5
			want: &topology.ParseError{Source: "rocm-smi --showtoponuma", Line: 5, Column: 32,
				Err: wrap(topology.ErrBadNumber, `numa node "x1"`)},
			msg: `rocm-smi --showtoponuma: line 5, column 33: not a number: numa node "x1"`,
		},
		{
			name: "line after a table",
			in: "==== Hops between two GPUs ====\n" + // 1
				"       GPU0  GPU1\n" + // 2
				"GPU0   0     1\n" + // 3
				"GPU1   1     0\n" + // 4
				"\n" + // 5
				"WARNING: after the table\n" + // 6
				"GPU[1]\t\t: (Topology) Numa Node: x1\n", // 7: handed back to the plain lines
			want: &topology.ParseError{Source: "rocm-smi", Line: 7, Column: 32,
				Err: wrap(topology.ErrBadNumber, `numa node "x1"`)},
		},
		{
			name: "more rows after blank and log lines",
			in:   "==== Hops between two GPUs ====\n       GPU0  GPU1\nGPU0   0     1\nGPU1   1     0\n\nWARNING: x\n\nGPU2   1     1\n",
			want: &topology.ParseError{Source: "rocm-smi --showtopo", Line: 8, Column: 0,
				Err: wrap(topology.ErrNotSquare, "more rows than the 2 columns")},
		},
		{
			name: "blank line inside a table",
			in:   "==== Hops between two GPUs ====\n       GPU0  GPU1\nGPU0   0     1\n   \n\nWARNING: x\nGPU1   1     0\n",
			want: &topology.ParseError{Source: "rocm-smi --showtopo", Line: 4, Column: 0,
				Err: wrap(topology.ErrNotSquare, "1 rows for 2 columns")},
		},
		{
			name: "table cut off before blank lines",
			in:   "==== Hops between two GPUs ====\n       GPU0  GPU1\nGPU0   0     1\nWARNING: x\n\n  \n\n",
			want: &topology.ParseError{Source: "rocm-smi --showtopo", Line: 4, Column: 0,
				Err: wrap(topology.ErrTruncated, "1 of 2 rows")},
		},
		{
			name: "no table before the end",
			in:   "==== Hops between two GPUs ====\nWARNING: x\n\n",
			want: &topology.ParseError{Source: "rocm-smi --showtopo", Line: 3, Column: 0,
				Err: wrap(topology.ErrTruncated, "no table after the section title")},
		},
		{
			name: "concise row after a multi-byte cell",
			in: "==== Concise Info ====\n" +
				"Device  Node  IDs              Temp    Power  Partitions          SCLK    MCLK    Fan  Perf  PwrCap  VRAM%  GPU%\n" +
				"==========\n" +
				"0       2     0x74a1,   28029  38.0°C  131.0W  NPS1, SPX, 0        131Mhz  900Mhz  0%   auto  750.0W  0%     -3%\n",
			want: &topology.ParseError{Source: "rocm-smi concise table", Line: 4, Column: 110, // a byte column: ° is two bytes
				Err: wrap(topology.ErrBadNumber, `percentage "-3%"`)},
		},
		{
			name: "concise table with no rows",
			in:   "==== Concise Info ====\nDevice  Node  IDs  Temp  Power  PwrCap  VRAM%  GPU%\n=====\nWARNING: x\n\n\n",
			want: &topology.ParseError{Source: "rocm-smi concise table", Line: 4, Column: 0,
				Err: wrap(topology.ErrTruncated, "concise table has no rows")},
		},
		{
			name: "nvidia-smi output",
			in:   nvidia,
			want: &topology.ParseError{Source: "rocm-smi", Err: wrap(topology.ErrWrongTool, "no rocm-smi section found")},
			msg:  "rocm-smi: not this tool's output: no rocm-smi section found",
		},
		{
			name: "empty",
			in:   "\n \n",
			want: &topology.ParseError{Source: "rocm-smi", Err: topology.ErrEmpty},
			msg:  "rocm-smi: empty output: no GPU devices found",
		},
		{
			name: "numa section cut short",
			in:   "==== Weight between two GPUs ====\n       GPU0  GPU1\nGPU0   0     15\nGPU1   15    0\n==== Numa Nodes ====\nGPU[0] : (Topology) Numa Node: 0\n",
			want: &topology.ParseError{Source: "rocm-smi", Err: wrap(topology.ErrInconsistent, `the "numa nodes" section lists GPU 0 (1) but the "weight between two gpus" section lists GPU 0-1 (2); is the output cut short?`)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseText(strings.NewReader(tc.in))
			if r != nil {
				t.Errorf("report %+v with error", r)
			}
			if !reflect.DeepEqual(err, tc.want) {
				t.Fatalf("err = %#v\n      (%v)\nwant %#v\n      (%v)", err, err, tc.want, tc.want)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("message %q, want %q", err.Error(), tc.msg)
			}
			if !errors.Is(err, tc.want.Err.(interface{ Unwrap() error }).Unwrap()) {
				t.Errorf("errors.Is fails for %v", err)
			}
		})
	}
}

// wrap builds the error the parsers return: a sentinel with detail.
func wrap(sentinel error, detail string) error {
	return fmt.Errorf("%w: %s", sentinel, detail)
}

func TestModelNoDevices(t *testing.T) {
	r, err := ParseText(strings.NewReader("==== ROCm System Management Interface ====\nERROR: No DRM devices available. Exiting\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Model(nil)
	want := &topology.ParseError{Source: "rocm-smi", Err: topology.ErrNoDevices}
	if !reflect.DeepEqual(err, want) {
		t.Errorf("err = %v, want %v", err, want)
	}
}

// listed is the titles of the sections r printed GPUs in, sorted.
func listed(r *Report) []string { return slices.Sorted(maps.Keys(r.Listed)) }
