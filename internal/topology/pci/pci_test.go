package pci

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/nvidiasmi"
	"github.com/jaypipes/pcidb"
)

func testNames(t *testing.T) *Names {
	t.Helper()
	db, err := pcidb.New(pcidb.WithPath(testutil.Testdata(t, "pci", "pci.ids")), noNetwork)
	if err != nil {
		t.Fatal(err)
	}
	return &Names{db: db}
}

// collect returns a Warner that keeps every warning.
func collect(w *[]string) topology.Warner {
	return func(format string, args ...any) { *w = append(*w, fmt.Sprintf(format, args...)) }
}

// TestCapturedTrees: trees built from real lspci -tv captures (and one
// synthesised from a topo -m capture) give the GPU-to-GPU classes that
// the same machine's nvidia-smi topo -m printed, and its NUMA nodes.
func TestCapturedTrees(t *testing.T) {
	for _, c := range []struct {
		tree, topo, name string
	}{
		{"esc8000a-e12", "pci/esc8000a-e12.topo-m.txt", "AD102GL [RTX 6000 Ada Generation]"},
		{"wrx90", "pci/wrx90.topo-m.txt", "AD102GL [RTX 6000 Ada Generation]"},
		{"savio4", "public/nvidia-smi-topo-m-8gpu-pcie-pxb-pix-sys-2nic-savio4.txt", "GA102GL [RTX A5000]"},
	} {
		t.Run(c.tree, func(t *testing.T) {
			var warns []string
			root := testutil.PCITree(t, c.tree)
			m, err := Read(root, collect(&warns))
			if err != nil {
				t.Fatal(err)
			}
			topo, err := nvidiasmi.ParseTopo(bytes.NewReader(testutil.ReadFile(t, testutil.Testdata(t, c.topo))))
			if err != nil {
				t.Fatal(err)
			}
			FillNames(m, root, testNames(t))
			if m.N() != len(topo.GPUs) {
				t.Fatalf("%d GPUs found, topo -m has %d", m.N(), len(topo.GPUs))
			}
			for i, d := range m.Devices {
				if d.Name != c.name || d.Vendor != topology.VendorNVIDIA {
					t.Errorf("GPU%d: %s %q, want nvidia %q", i, d.Vendor, d.Name, c.name)
				}
				if want := topo.GPUs[i].NUMAAffinity; d.NUMANode >= 0 && d.NUMANode != want {
					t.Errorf("GPU%d: NUMA %d, topo -m says %d", i, d.NUMANode, want)
				}
				for j := range m.Devices {
					if i != j && m.Link(i, j).Level != topo.Cells[i][j] {
						t.Errorf("GPU%d-GPU%d: %s, topo -m says %s", i, j, m.Link(i, j).Level, topo.Cells[i][j])
					}
				}
			}
			if len(warns) != 1 || warns[0] != FabricNote {
				t.Errorf("warnings %q, want only the fabric note", warns)
			}
		})
	}
}

// TestNumericNames: without a PCI ID database the name is the ids.
func TestNumericNames(t *testing.T) {
	root := testutil.PCITree(t, "wrx90")
	m, err := Read(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Devices[0].Name != "" {
		t.Errorf("Read named the device %q: names are FillNames'", m.Devices[0].Name)
	}
	FillNames(m, root, &Names{})
	if got := m.Devices[0].Name; got != "10de:26b1" {
		t.Errorf("name %q, want 10de:26b1", got)
	}
	if m.Devices[0].PCIAddress != "0000:c1:00.0" || m.Devices[1].PCIAddress != "0000:c2:00.0" {
		t.Errorf("addresses %s %s", m.Devices[0].PCIAddress, m.Devices[1].PCIAddress)
	}
}

// TestAMDAccelerator: an AMD Instinct is a processing accelerator
// (class 0x12), not a display controller, and is found all the same,
// after the integrated Radeon of the CPU (00:02.0, PCI address order).
func TestAMDAccelerator(t *testing.T) {
	root := t.TempDir()
	testutil.PCIFunction(t, root, "pci0000:00/0000:00:01.0", "1022", "1483", "0x060400", "0")
	testutil.PCIFunction(t, root, "pci0000:00/0000:00:01.0/0000:01:00.0", "1002", "74a1", "0x120000", "0")
	testutil.PCIFunction(t, root, "pci0000:00/0000:00:02.0", "1002", "164e", "0x030000", "0")
	m, err := Read(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	FillNames(m, root, testNames(t))
	if m.N() != 2 || m.Vendor != topology.VendorAMD || m.Devices[0].Name != "1002:164e" || m.Devices[1].Name != "Aqua Vanjaram [Instinct MI300X]" {
		t.Fatalf("got %d devices, vendor %s, names %q", m.N(), m.Vendor, []string{m.Devices[0].Name, m.Devices[1].Name})
	}
	if l := m.Link(0, 1); l.Level != topology.LevelPHB || l.Direct {
		t.Errorf("root-bus neighbours: %s direct=%v, want PHB through the host", l.Level, l.Direct)
	}
}

// TestMixedVendors: an AMD integrated GPU beside two NVIDIA cards is left
// out with one line naming it: CUDA numbers only the NVIDIA ones.
func TestMixedVendors(t *testing.T) {
	root := testutil.PCITree(t, "wrx90")
	testutil.PCIFunction(t, root, "pci0000:00/0000:00:08.1/0000:0e:00.0", "1002", "164e", "0x030000", "-1")
	var warns []string
	m, err := Read(root, collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 2 || m.Vendor != topology.VendorNVIDIA || m.Devices[0].PCIAddress != "0000:c1:00.0" {
		t.Errorf("%d devices, vendor %s, first %s; want the 2 NVIDIA ones", m.N(), m.Vendor, m.Devices[0].PCIAddress)
	}
	want := "pci: 2 NVIDIA and 1 AMD GPUs found; using the NVIDIA ones, leaving out 0000:0e:00.0 (CUDA and HIP each number only their own vendor's devices)"
	if len(warns) != 2 || warns[0] != want {
		t.Errorf("warnings %q, want %q and the fabric note", warns, want)
	}
}

// TestUnreadableFunction: a GPU whose class file is missing is left out
// with a warning naming it; the others are found.
func TestUnreadableFunction(t *testing.T) {
	root := testutil.PCITree(t, "wrx90")
	if err := os.Remove(root + "/sys/devices/pci0000:c0/0000:c0:03.1/0000:c2:00.0/class"); err != nil {
		t.Fatal(err)
	}
	var warns []string
	m, err := Read(root, collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 1 || len(warns) != 2 || !strings.Contains(warns[0], "0000:c2:00.0 left out") {
		t.Errorf("%d GPUs, warnings %q; want 1 and one naming 0000:c2:00.0", m.N(), warns)
	}
}

// TestBadNUMANode: a numa_node that is not a number leaves the GPU's
// NUMA node unknown with a warning naming it, never a silent -1.
func TestBadNUMANode(t *testing.T) {
	root := testutil.PCITree(t, "esc8000a-e12")
	if err := os.WriteFile(root+"/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/numa_node", []byte("zero\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var warns []string
	m, err := Read(root, collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if m.Devices[1].NUMANode != -1 || len(warns) != 2 || !strings.HasPrefix(warns[0], "pci: 0000:41:00.0: NUMA node unknown: ") {
		t.Errorf("NUMA %d, warnings %q; want -1 and one naming 0000:41:00.0", m.Devices[1].NUMANode, warns)
	}
}

// TestNoGPU: a tree with only a network card and an ASPEED VGA finds no
// GPU: ErrNoDevices, no warning.
func TestNoGPU(t *testing.T) {
	root := t.TempDir()
	testutil.PCIFunction(t, root, "pci0000:00/0000:00:03.0", "15b3", "1021", "0x020000", "0")
	testutil.PCIFunction(t, root, "pci0000:00/0000:00:05.0", "1a03", "2000", "0x030000", "0")
	var warns []string
	_, err := Read(root, collect(&warns))
	if !errors.Is(err, topology.ErrNoDevices) || len(warns) != 0 {
		t.Errorf("err %v, warnings %q; want ErrNoDevices and none", err, warns)
	}
}

// TestLiveSysfs reads this machine's own PCI tree: no error but
// ErrNoDevices when it has no GPU, a valid model when it has, and no
// function it could not read.
func TestLiveSysfs(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skipf("no PCI tree here: %v", err)
	}
	var warns []string
	m, err := Read("/", collect(&warns))
	switch {
	case errors.Is(err, topology.ErrNoDevices):
		if len(warns) != 0 {
			t.Errorf("no GPU, but warnings %q", warns)
		}
	case err != nil:
		t.Fatal(err)
	default:
		if err := m.Validate(); err != nil {
			t.Error(err)
		}
		if len(warns) != 1 {
			t.Errorf("warnings %q, want only the fabric note", warns)
		}
	}
}

func TestLevel(t *testing.T) {
	p := func(s string) []string { return strings.Split(s, "/") }
	for _, c := range []struct {
		a, b   string
		na, nb int
		want   string
	}{
		{"pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:04.0/0000:04:00.0", 0, 0, "PIX"},
		{"pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0/0000:05:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:04.0/0000:06:00.0", 0, 0, "PXB"},
		{"pci0000:00/0000:00:01.1/0000:01:00.0", "pci0000:00/0000:00:03.1/0000:02:00.0", 0, 0, "PHB"},
		{"pci0000:00/0000:00:05.0", "pci0000:00/0000:00:06.0", -1, -1, "PHB"},
		{"pci0000:00/0000:00:01.1/0000:01:00.0", "pci0000:40/0000:40:01.1/0000:41:00.0", 0, 0, "NODE"},
		{"pci0000:00/0000:00:01.1/0000:01:00.0", "pci0000:c0/0000:c0:01.1/0000:c1:00.0", 0, 1, "SYS"},
		{"", "pci0000:c0/0000:c0:01.1/0000:c1:00.0", 0, 0, "SYS"},
	} {
		if got := Level(p(c.a), p(c.b), c.na, c.nb); got != c.want {
			t.Errorf("%s - %s: %s, want %s", c.a, c.b, got, c.want)
		}
		if got := Level(p(c.b), p(c.a), c.nb, c.na); got != c.want {
			t.Errorf("%s - %s (swapped): %s, want %s", c.b, c.a, got, c.want)
		}
	}
}

func TestBridgePath(t *testing.T) {
	got, err := BridgePath("../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0", "0000:41:00.0")
	if err != nil || strings.Join(got, "/") != "pci0000:40/0000:40:01.1/0000:41:00.0" {
		t.Errorf("got %q, %v", got, err)
	}
	// Intel VMD nests a PCI domain under a device of another.
	got, err = BridgePath("../../../devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1d.0/10000:e1:00.0", "10000:e1:00.0")
	if err != nil || strings.Join(got, "/") != "pci10000:e0/10000:e0:1d.0/10000:e1:00.0" {
		t.Errorf("VMD: got %q, %v", got, err)
	}
	for _, bad := range []string{
		"../../../devices/pci0000:40/0000:40:01.1/0000:41:00.1", // another function
		"../../../devices/platform/foo/0000:41:00.0",            // no host bridge
		"../../../devices/pci0000:40/bogus/0000:41:00.0",        // not an address
		"../../../devices/pci0000:40",
	} {
		if _, err := BridgePath(bad, "0000:41:00.0"); !errors.Is(err, errPath) {
			t.Errorf("%q: err %v, want errPath", bad, err)
		}
	}
}

// FuzzBridgePath: any link target either fails or gives a path Level
// accepts; Level never panics and is symmetric.
func FuzzBridgePath(f *testing.F) {
	f.Add("../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0", "../../../devices/pci0000:40/0000:40:03.1/0000:42:00.0")
	f.Add("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:04.0/0000:04:00.0")
	f.Add("../../../devices/pci10000:00/10000:00:01.0/10000:01:00.0", "/pci0000:00")
	f.Fuzz(func(t *testing.T, la, lb string) {
		pa, erra := BridgePath(la, la[strings.LastIndex(la, "/")+1:])
		pb, errb := BridgePath(lb, lb[strings.LastIndex(lb, "/")+1:])
		if erra != nil || errb != nil {
			return
		}
		x, y := Level(pa, pb, 0, 1), Level(pb, pa, 1, 0)
		if x != y {
			t.Fatalf("asymmetric: %s / %s", x, y)
		}
		switch x {
		case topology.LevelPIX, topology.LevelPXB, topology.LevelPHB, topology.LevelNODE, topology.LevelSYS:
		default:
			t.Fatalf("level %q", x)
		}
	})
}

// FuzzReadHex: any id file content is a number or an error naming the
// file, never a panic; what it accepts reads back the same.
func FuzzReadHex(f *testing.F) {
	for _, s := range []string{"0x10de\n", "0x030000\n", "0x120000", "10de", "0x", "0xffffffffff", " 0x1002 \n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := readHex(fstest.MapFS{"vendor": {Data: []byte(s)}}, "vendor")
		if err != nil {
			if !strings.Contains(err.Error(), "vendor") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if got := fmt.Sprintf("%x", v); !strings.EqualFold(strings.TrimLeft(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0"), strings.TrimLeft(got, "0")) {
			t.Fatalf("%q read as %s", s, got)
		}
	})
}
