package topocmd_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/topocmd"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// exampleModel is the bundled MI250 example with two host NUMA nodes and
// device 3 busy.
func exampleModel(t *testing.T) *topology.Model {
	t.Helper()
	m, err := discover.Example()
	if err != nil {
		t.Fatal(err)
	}
	m.SetNUMANodes([]topology.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3}}, {ID: 1, CPUs: []int{4, 5, 6, 7}}})
	m.Devices[3].Busy, m.Devices[3].BusyReason = true, "2 processes"
	m.Devices[0].Name, m.Devices[0].PCIAddress = "AMD Instinct MI250X", "0000:c1:00.0"
	m.Devices[0].MemUsedMiB, m.Devices[0].MemTotalMiB = 10, 65536
	if err := m.Finish(); err != nil { // as a source would, after filling it
		t.Fatal(err)
	}
	return m
}

func TestNewCmdTopoFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		json     bool
		measured bool
		wantErr  bool
	}{
		{name: "no flags", args: nil},
		{name: "json", args: []string{"--json"}, json: true},
		{name: "measured", args: []string{"--measured", "rbt.txt"}, measured: true},
		{name: "arguments", args: []string{"extra"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams()
			f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return nil }}
			var got *topocmd.Options
			cmd := topocmd.NewCmdTopo(f, func(ctx context.Context, o *topocmd.Options) error {
				got = o
				return nil
			})
			cmd.SetArgs(tt.args)
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.ExecuteContext(context.Background())
			if tt.wantErr {
				if err == nil {
					t.Fatalf("%q: no error", tt.args)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q: %v", tt.args, err)
			}
			if got.JSON != tt.json || (got.Measured != nil) != tt.measured {
				t.Errorf("%q: JSON %v Measured set %v, want %v %v", tt.args, got.JSON, got.Measured != nil, tt.json, tt.measured)
			}
		})
	}
}

func run(t *testing.T, m *topology.Model, tty, json bool) string {
	t.Helper()
	ios, _, out, _ := cmdtest.Streams()
	cmdtest.SetStdoutTTY(ios, tty)
	err := topocmd.Run(context.Background(), &topocmd.Options{
		IO:       ios,
		Topology: func(context.Context) (*topology.Model, error) { return m, nil },
		JSON:     json,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestRunTable(t *testing.T) {
	out := run(t, exampleModel(t), true, false)
	lines := strings.Split(out, "\n")
	for _, want := range []string{
		"Source: example (seed MI250 node); bandwidth theoretical; 8 devices\n",
		"XGMI 200", "XGMI 100", "XGMI 50", "PHB 32*",
		"* = assumed",
		"NUMA node 0: CPUs 0-3\n", "NUMA node 1: CPUs 4-7\n",
		"AMD Instinct MI250X", "0000:c1:00.0", "10/65536 MiB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The matrix header ends with the per-device columns.
	if h := lines[2]; !strings.HasPrefix(strings.TrimSpace(h), "GPU0") || !strings.Contains(h, "NUMA") || !strings.HasSuffix(strings.TrimSpace(h), "NUMA  CPUs  Package/hive  State") {
		t.Errorf("matrix header %q", h)
	}
	// Row of GPU0: X on the diagonal, XGMI 200 to its sibling die, the
	// assumed host path to GPU3 (same NUMA node: PHB), the assumed paths
	// across NUMA nodes to GPU4, 5, 7 (SYS), NUMA node 0 and its CPUs.
	row0 := strings.Fields(lines[3])
	want0 := []string{"GPU0", "X", "XGMI", "200", "XGMI", "50", "PHB", "32*", "SYS", "16*", "SYS", "16*", "XGMI", "100", "SYS", "16*", "0", "0-3", "pkg0", "free"}
	if !reflect.DeepEqual(row0, want0) {
		t.Errorf("GPU0 row\n got %q\nwant %q", row0, want0)
	}
	row3 := lines[6]
	if !strings.HasPrefix(row3, "GPU3") || !strings.HasSuffix(strings.Join(strings.Fields(row3), " "), "0 0-3 pkg1 busy (2 processes)") {
		t.Errorf("GPU3 row %q, want NUMA 0, CPUs 0-3, pkg1, busy (2 processes)", row3)
	}
	row4 := strings.Fields(lines[7])
	if n := len(row4); n < 4 || row4[n-4] != "1" || row4[n-3] != "4-7" {
		t.Errorf("GPU4 row %q, want NUMA 1 with CPUs 4-7", lines[7])
	}
}

// A pair without peer-to-peer access is marked in the table (with a
// legend line) and in the TSV.
func TestRunNoP2P(t *testing.T) {
	m := exampleModel(t)
	m.Link(0, 3).P2P = topology.P2PUnavailable
	out := run(t, m, true, false)
	row0 := strings.Fields(strings.Split(out, "\n")[3])
	if want := []string{"PHB", "32*", "noP2P"}; !reflect.DeepEqual(row0[6:9], want) {
		t.Errorf("GPU0 row %q, want GPU3's cell %q", row0, want)
	}
	if !strings.Contains(out, "noP2P = no peer-to-peer access: copies go through host memory") {
		t.Errorf("no legend for noP2P:\n%s", out)
	}
	if strings.Contains(run(t, exampleModel(t), true, false), "noP2P") {
		t.Error("noP2P shown for a model without such pairs")
	}
	if tsv := run(t, m, false, false); !strings.Contains(tsv, "\tPHB 32* noP2P\t") {
		t.Errorf("TSV:\n%s", tsv)
	}
}

func TestRunTSV(t *testing.T) {
	out := run(t, exampleModel(t), false, false)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1+8 {
		t.Fatalf("%d lines, want a header and 8 devices:\n%s", len(lines), out)
	}
	head := "GPU\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNUMA\tCPUs\tPackage/hive\tState\tRuntime\tName\tPCI\tUnique ID\tMemory used"
	if lines[0] != head {
		t.Errorf("header\n got %q\nwant %q", lines[0], head)
	}
	cols := len(strings.Split(head, "\t"))
	for i, l := range lines[1:] {
		if n := len(strings.Split(l, "\t")); n != cols {
			t.Errorf("row %d has %d cells, the header %d: %q", i, n, cols, l)
		}
	}
	for i, want := range map[int]string{
		// host paths across the NUMA nodes are SYS 16 GB/s (assumed)
		0: "GPU0\tX\tXGMI 200\tXGMI 50\tPHB 32*\tSYS 16*\tSYS 16*\tXGMI 100\tSYS 16*\t0\t0-3\tpkg0\tfree\t0\t",
		3: "GPU3\tPHB 32*\tXGMI 50\tXGMI 200\tX\tSYS 16*\tSYS 16*\tSYS 16*\tXGMI 50\t0\t0-3\tpkg1\tbusy (2 processes)\t3\t",
	} {
		if !strings.HasPrefix(lines[i+1], want) {
			t.Errorf("row %d\n got %q\nwant prefix %q", i, lines[i+1], want)
		}
	}
	if strings.Contains(out, "  ") || strings.Contains(out, "Source:") {
		t.Errorf("TSV has table formatting:\n%s", out)
	}
}

func TestRunJSONRoundTrip(t *testing.T) {
	m := exampleModel(t)
	for _, tty := range []bool{true, false} {
		out := run(t, m, tty, true)
		back, err := topology.ReadJSON(strings.NewReader(out))
		if err != nil {
			t.Fatalf("tty %v: ReadJSON: %v\n%s", tty, err, out)
		}
		if !reflect.DeepEqual(back, m) {
			for i := range m.Devices {
				if !reflect.DeepEqual(back.Devices[i], m.Devices[i]) {
					t.Errorf("tty %v: device %d read back\n got %+v\nwant %+v", tty, i, back.Devices[i], m.Devices[i])
				}
			}
			if !reflect.DeepEqual(back.Links, m.Links) || !reflect.DeepEqual(back.NUMANodes, m.NUMANodes) {
				t.Errorf("tty %v: links or NUMA nodes differ", tty)
			}
			t.Errorf("tty %v: model read back differs", tty)
		}
	}
}

func TestRunErrors(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams()
	boom := errors.New("sysfs: no GPU found")
	err := topocmd.Run(context.Background(), &topocmd.Options{
		IO:       ios,
		Topology: func(context.Context) (*topology.Model, error) { return nil, boom },
	})
	if !errors.Is(err, boom) || out.Len() != 0 {
		t.Errorf("discovery failure: error %v output %q, want the discovery error and no output", err, out)
	}

	// --measured with a file that does not exist names the flag.
	ios, _, out, _ = cmdtest.Streams()
	m := exampleModel(t)
	f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return nil }}
	cmd := topocmd.NewCmdTopo(f, func(ctx context.Context, o *topocmd.Options) error {
		o.Topology = func(context.Context) (*topology.Model, error) { return m, nil }
		return topocmd.Run(ctx, o)
	})
	cmd.SetArgs([]string{"--measured", t.TempDir() + "/missing.txt"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true // as the root sets them
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	err = cmd.ExecuteContext(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "--measured: ") || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("--measured missing file: error %v, want one starting --measured: naming the file", err)
	}
	if out.Len() != 0 {
		t.Errorf("--measured missing file printed %q", out)
	}
}

// TestRunTablePackages: a node with more than 16 devices (MI300X CPX, 63
// partitions in 8 packages) is shown package by package: the matrix is
// 8 x 8, within a package the partitions' XGMI 819.2 GB/s, between
// packages the slowest pair.
func TestRunTablePackages(t *testing.T) {
	m := &topology.Model{Source: "test"}
	for g := 0; g < 8; g++ {
		for p := 0; p < 8 && len(m.Devices) < 63; p++ {
			i := len(m.Devices)
			m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, Package: fmt.Sprintf("gpu%d", g), Partition: p, NUMANode: g / 4})
		}
	}
	for a := 0; a < 63; a++ {
		for b := a + 1; b < 63; b++ {
			l := topology.Link{A: a, B: b, Type: topology.LinkXGMI, Direct: true}
			if m.Devices[a].Package == m.Devices[b].Package {
				l.MaxBandwidth = 819200
			}
			m.Links = append(m.Links, l)
		}
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	io, _, out, _ := cmdtest.Streams()
	cmdtest.SetStdoutTTY(io, true)
	if err := topocmd.Run(context.Background(), &topocmd.Options{IO: io, Topology: func(context.Context) (*topology.Model, error) { return m, nil }}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"63 devices in 8 packages", "P7  56-62", "XGMI 819.2", "XGMI 50*"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "GPU62  ") && strings.Contains(s, "GPU61\t") {
		t.Errorf("a 63 x 63 matrix was printed")
	}
}

// TestTopoNamesFromPCIDatabase: a device its source left nameless is
// shown with the PCI ID database's product name for the ids in its PCI
// tree (read under --sysfs-root); a name the source gave is kept.
func TestTopoNamesFromPCIDatabase(t *testing.T) {
	t.Setenv("PCIDB_PATH", testutil.Testdata(t, "pci", "pci.ids"))
	m := &topology.Model{Source: "test", Devices: []topology.Device{
		{Index: 0, RuntimeIndex: 0, PCIAddress: "0000:c1:00.0", NUMANode: -1},
		{Index: 1, RuntimeIndex: 1, PCIAddress: "0000:c2:00.0", NUMANode: -1, Name: "NVIDIA RTX 6000 Ada Generation"},
	}}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	ios, _, out, _ := cmdtest.Streams()
	f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return nil },
		Discover: func(context.Context, discover.Options) (*topology.Model, error) { return m, nil }}
	f.Topo.SysfsRoot = testutil.PCITree(t, "wrx90")
	cmd := topocmd.NewCmdTopo(f, nil)
	cmd.SetArgs([]string{"--json"})
	cmd.SetOut(ios.Out)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name": "AD102GL [RTX 6000 Ada Generation]"`, `"name": "NVIDIA RTX 6000 Ada Generation"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	// A saved topology is another node's: this PCI tree does not name it.
	f.Topo.File = "node.json"
	var got *topocmd.Options
	cmd = topocmd.NewCmdTopo(f, func(_ context.Context, o *topocmd.Options) error { got = o; return nil })
	cmd.SetArgs(nil)
	if err := cmd.ExecuteContext(context.Background()); err != nil || got.Names != nil {
		t.Errorf("--topology FILE: err %v, names filled from this node's PCI tree", err)
	}
}
