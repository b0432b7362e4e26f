package discover

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/amdsmi"
	"github.com/amdrun/amdrun/internal/topology/kfd"
	"github.com/amdrun/amdrun/internal/topology/pci"
	"github.com/amdrun/amdrun/internal/topology/rbt"
	"github.com/amdrun/amdrun/internal/topology/rocmsmi"
)

// TestMI210SysfsAndRocmSmiAgree: the same MI210 node described by its
// real KFD tree and by rocm-smi (--showtopo --shownodesbw) gives the same
// links (type, direct, bandwidth) and the same NUMA node per device.
func TestMI210SysfsAndRocmSmiAgree(t *testing.T) {
	fromKFD, err := kfd.Read(os.DirFS(testutil.KFD(t, "topo-mi210-xgmi-pcie")), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rocmsmi.ParseText(bytes.NewReader(testutil.ReadFile(t, testutil.Testdata(t, "rocm-smi", "mi210-8gpu-2hive-showtopo-nodesbw.txt"))))
	if err != nil {
		t.Fatal(err)
	}
	fromSMI, err := rep.Model(nil)
	if err != nil {
		t.Fatal(err)
	}
	if fromKFD.N() != 8 || fromSMI.N() != 8 {
		t.Fatalf("%d and %d devices, want 8", fromKFD.N(), fromSMI.N())
	}
	for i := range fromKFD.Devices {
		if a, b := fromKFD.Devices[i].NUMANode, fromSMI.Devices[i].NUMANode; a != b {
			t.Errorf("GPU%d: NUMA %d from sysfs, %d from rocm-smi", i, a, b)
		}
	}
	for i, a := range fromKFD.Links {
		b := fromSMI.Links[i]
		if a.A != b.A || a.B != b.B || a.Type != b.Type || a.Direct != b.Direct || a.MaxBandwidth != b.MaxBandwidth {
			t.Errorf("link %d-%d: sysfs %s direct=%v %d MB/s; rocm-smi %s direct=%v %d MB/s",
				a.A, a.B, a.Type, a.Direct, a.MaxBandwidth, b.Type, b.Direct, b.MaxBandwidth)
		}
	}
}

// TestSelectionFollowsMeasurement: on an MI300X whose amd-smi table says
// every pair is XGMI at 50000 MB/s, a rocm_bandwidth_test run measuring
// GPU 3 at a quarter of that makes the selector leave GPU 3 out, where
// the theoretical table picks it.
func TestSelectionFollowsMeasurement(t *testing.T) {
	load := func() *topology.Model {
		topo, err := amdsmi.ParseTopology(bytes.NewReader(testutil.ReadFile(t, testutil.Testdata(t, "amd-smi", "mi300x-8gpu-spx-topology.txt"))))
		if err != nil {
			t.Fatal(err)
		}
		m, err := amdsmi.Build(topo, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	theo := load()
	c, err := selector.Prepare(theo).Select(selector.Request{N: 4}, selector.Tree)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Devices; len(got) != 4 || got[3] != 3 {
		t.Fatalf("theoretical choice %v, want 0,1,2,3 (every set is equal, lowest indices)", got)
	}
	meas := load()
	res, err := rbt.Parse(bytes.NewReader(testutil.ReadFile(t, testutil.Testdata(t, "rocm_bandwidth_test", "mi300x-8gpu-gpu3-degraded-v2.0.1.txt"))))
	if err != nil {
		t.Fatal(err)
	}
	if err := rbt.Apply(meas, res, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 4, 7} {
		c, err := selector.Prepare(meas).Select(selector.Request{N: n}, selector.Tree)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range c.Devices {
			if d == 3 {
				t.Errorf("N=%d: measured choice %v includes GPU 3, measured at a quarter of the others", n, c.Devices)
			}
		}
	}
	if meas.Bandwidth != "measured" {
		t.Errorf("model bandwidth %q, want measured (what --explain reports)", meas.Bandwidth)
	}
}

// TestSelectionPrefersP2P: on a PCIe board where every pair is PHB, a
// pair without peer-to-peer access (its copies go through host memory)
// is passed over for one that copies directly, where equal links would
// pick the lowest indices.
func TestSelectionPrefersP2P(t *testing.T) {
	m := &topology.Model{Source: "test", Vendor: topology.VendorAMD}
	for i := 0; i < 3; i++ {
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: 0})
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	pick := func() []int {
		c, err := selector.Prepare(m).Select(selector.Request{N: 2}, selector.Tree)
		if err != nil {
			t.Fatal(err)
		}
		return c.Devices
	}
	if got := pick(); fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("equal links: chose %v, want [0 1]", got)
	}
	m.Link(0, 1).P2P = topology.P2PUnavailable
	if got := pick(); fmt.Sprint(got) != "[0 2]" {
		t.Errorf("0-1 without P2P: chose %v, want [0 2]", got)
	}
}

// TestAutoFallsBackToPCITree: on a node with no KFD and no vendor tool
// (every tool is not on PATH) auto finds the GPUs in the PCI tree, with
// the line saying what PCI cannot see, and --source pci does the same.
func TestAutoFallsBackToPCITree(t *testing.T) {
	root := testutil.PCITree(t, "esc8000a-e12")
	noTool := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return nil, fmt.Errorf("%s: %w", name, topology.ErrToolNotFound)
	}
	for _, src := range []string{"auto", "pci"} {
		var warns []string
		m, err := Discover(context.Background(), Options{Source: src, SysfsRoot: root, Run: noTool,
			Warn: func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) }})
		if err != nil {
			t.Fatalf("--source %s: %v", src, err)
		}
		if m.Source != pci.Source || m.N() != 4 || m.Link(0, 2).Level != topology.LevelSYS {
			t.Errorf("--source %s: source %q, %d GPUs, GPU0-GPU2 %s; want pci, 4, SYS", src, m.Source, m.N(), m.Link(0, 2).Level)
		}
		if !slices.Contains(warns, pci.FabricNote) {
			t.Errorf("--source %s: warnings %q lack the fabric note", src, warns)
		}
	}
}
