package kfd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// fixture opens one of the shared real KFD trees.
func fixture(t testing.TB, name string) fs.FS {
	t.Helper()
	return DirFS(testutil.KFD(t, name))
}

// collect returns a Warner that records warnings.
func collect(ws *[]string) topology.Warner {
	return func(format string, args ...any) { *ws = append(*ws, fmt.Sprintf(format, args...)) }
}

func TestParseProps(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Props
		wantErr *topology.ParseError
		sent    error
	}{
		{name: "node", in: "cpu_cores_count 0\nsimd_count 416\nhive_id 12609507387757274807\n",
			want: Props{"cpu_cores_count": 0, "simd_count": 416, "hive_id": 12609507387757274807}},
		{name: "blank lines and CRLF", in: "\n type 11\r\n\nweight\t15\n", want: Props{"type": 11, "weight": 15}},
		{name: "empty", in: "", want: Props{}},
		{name: "max uint64", in: "unique_id 18446744073709551615", want: Props{"unique_id": 1<<64 - 1}},
		{name: "not a number", in: "type 2\nweight abc\n",
			wantErr: &topology.ParseError{Source: "src", Line: 2, Column: 7}, sent: topology.ErrBadNumber},
		{name: "negative", in: "weight -1\n",
			wantErr: &topology.ParseError{Source: "src", Line: 1, Column: 7}, sent: topology.ErrBadNumber},
		{name: "overflow", in: "weight 18446744073709551616\n",
			wantErr: &topology.ParseError{Source: "src", Line: 1, Column: 7}, sent: topology.ErrBadNumber},
		{name: "no value", in: "type 2\nweight\n",
			wantErr: &topology.ParseError{Source: "src", Line: 2, Column: 6}, sent: topology.ErrSyntax},
		{name: "three fields", in: "weight 1 2\n",
			wantErr: &topology.ParseError{Source: "src", Line: 1, Column: 9}, sent: topology.ErrSyntax},
		{name: "bad key", in: "max-bandwidth 1\n",
			wantErr: &topology.ParseError{Source: "src", Line: 1, Column: 3}, sent: topology.ErrSyntax},
		{name: "duplicate key", in: "type 2\ntype 11\n",
			wantErr: &topology.ParseError{Source: "src", Line: 2, Column: 0}, sent: topology.ErrSyntax},
		{name: "cache sibling_map", in: "sibling_map 1,0,0\n",
			wantErr: &topology.ParseError{Source: "src", Line: 1, Column: 12}, sent: topology.ErrBadNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProps([]byte(tt.in), "src")
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
				return
			}
			var pe *topology.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want *ParseError", err, err)
			}
			if pe.Source != tt.wantErr.Source || pe.Line != tt.wantErr.Line || pe.Column != tt.wantErr.Column {
				t.Errorf("got %s line %d col %d, want %s line %d col %d", pe.Source, pe.Line, pe.Column,
					tt.wantErr.Source, tt.wantErr.Line, tt.wantErr.Column)
			}
			if !errors.Is(err, tt.sent) {
				t.Errorf("error %v does not wrap %v", err, tt.sent)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "src: line ") || strings.Contains(msg, "\n") {
				t.Errorf("message %q: want one line starting with the source", msg)
			}
		})
	}
}

func TestParsePropsFixture(t *testing.T) {
	p := testutil.KFD(t, "topo-mi210-xgmi-pcie", "nodes", "2", "properties")
	props, err := parseProps(testutil.ReadFile(t, p), p)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]uint64{"simd_count": 416, "location_id": 25344, "gfx_target_version": 90010,
		"hive_id": 12609507387757274807, "unique_id": 1801979520617338022, "max_engine_clk_ccompute": 2450} {
		if got, ok := props[k]; !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", k, got, ok, want)
		}
	}
	if len(props) != 38 {
		t.Errorf("%d keys, want 38", len(props))
	}
}

func TestReadMI210(t *testing.T) {
	var warns []string
	m, err := Read(fixture(t, "topo-mi210-xgmi-pcie"), collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	if m.N() != 8 || m.Source != "sysfs" || m.Vendor != topology.VendorAMD {
		t.Fatalf("got %v vendor %q", m, m.Vendor)
	}
	const hiveA, hiveB = "0xaefdf8293fefa6b7", "0xfb11632c00f4d272" // 12609507387757274807, 18091350218769748594
	pci := []string{"0000:63:00.0", "0000:43:00.0", "0000:03:00.0", "0000:26:00.0",
		"0000:e3:00.0", "0000:c3:00.0", "0000:83:00.0", "0000:a3:00.0"}
	for i, d := range m.Devices {
		hive, numa := hiveA, 0
		if i >= 4 {
			hive, numa = hiveB, 1
		}
		if d.Index != i || d.RuntimeIndex != i || d.Hive != hive || d.NUMANode != numa || d.PCIAddress != pci[i] ||
			d.Name != "gfx90a" || d.Package != "" || d.Partition != 0 || d.Busy {
			t.Errorf("device %d: %+v", i, d)
		}
	}
	if got := m.Devices[0].UniqueID; got != "0x1901ead3a2ecd4a6" { // 1801979520617338022
		t.Errorf("device 0 unique id %q", got)
	}
	for a := 0; a < 8; a++ {
		for b := a + 1; b < 8; b++ {
			l := m.Link(a, b)
			sameHive := (a < 4) == (b < 4)
			if sameHive {
				if l.Type != topology.LinkXGMI || !l.Direct || l.Weight != 15 || l.Hops != 1 ||
					l.MaxBandwidth != 50000 || l.MinBandwidth != 50000 || l.Assumed {
					t.Errorf("link %d-%d: %+v", a, b, *l)
				}
				continue
			}
			if l.Type != topology.LinkPCIe || l.Direct || l.Weight != 72 || l.Level != topology.LevelSYS ||
				!l.Assumed || l.MaxBandwidth != topology.DefaultHostBandwidth/2 {
				t.Errorf("cross-hive link %d-%d: %+v", a, b, *l)
			}
		}
	}
}

func TestReadMI300CPX(t *testing.T) {
	var warns []string
	m, err := Read(fixture(t, "topo-mi300-cpx"), collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	if m.N() != 63 {
		t.Fatalf("%d devices, want 63 (CPU nodes excluded)", m.N())
	}
	pk := m.Packages()
	if len(pk) != 8 {
		t.Fatalf("%d packages, want 8", len(pk))
	}
	for g, devs := range pk {
		want := 8
		if g == 7 {
			want = 7
		}
		if len(devs) != want {
			t.Errorf("package %d has %d partitions, want %d", g, len(devs), want)
		}
		for p, i := range devs {
			d := m.Devices[i]
			if i != g*8+p || d.Partition != p || d.Package != d.UniqueID || d.Package == "" {
				t.Errorf("device %d: package %q partition %d (group %d pos %d)", i, d.Package, d.Partition, g, p)
			}
		}
	}
	last := m.Devices[62]
	if last.PCIAddress != "0000:e5:00.6" || last.Partition != 6 || last.NUMANode != 1 || last.Name != "gfx942" {
		t.Errorf("last device %+v", last)
	}
	if m.Devices[31].NUMANode != 0 || m.Devices[32].NUMANode != 1 {
		t.Errorf("NUMA of devices 31, 32: %d, %d; want 0, 1", m.Devices[31].NUMANode, m.Devices[32].NUMANode)
	}
	for a := 0; a < m.N(); a++ {
		for b := a + 1; b < m.N(); b++ {
			l := m.Link(a, b)
			if l.Type != topology.LinkXGMI || !l.Direct {
				t.Fatalf("link %d-%d: %+v", a, b, *l)
			}
			if m.Devices[a].Package == m.Devices[b].Package {
				if l.Weight != 13 || l.MaxBandwidth != 819200 || l.Assumed {
					t.Fatalf("intra-GPU link %d-%d: %+v", a, b, *l)
				}
			} else if l.Weight != 41 || !l.Assumed || l.MaxBandwidth != topology.XGMILinkBandwidth {
				t.Fatalf("cross-GPU link %d-%d: %+v", a, b, *l)
			}
		}
	}
}

func TestReadMI308(t *testing.T) {
	var warns []string
	m, err := Read(fixture(t, "topology-parsing-mi308"), collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	if m.N() != 32 {
		t.Fatalf("%d devices, want 32", m.N())
	}
	pk := m.Packages()
	if len(pk) != 8 {
		t.Fatalf("%d packages, want 8", len(pk))
	}
	for _, devs := range pk {
		if len(devs) != 4 {
			t.Errorf("package of %v: want 4 partitions", devs)
		}
	}
	for i, d := range m.Devices {
		// name reads "ip discovery", the kernel's placeholder
		if d.Name != "gfx942" || d.Partition != i%4 || d.Hive != "0x1d1541eb451bea5b" {
			t.Errorf("device %d: %+v", i, d)
		}
		if wantNUMA := i / 16; d.NUMANode != wantNUMA {
			t.Errorf("device %d NUMA %d, want %d", i, d.NUMANode, wantNUMA)
		}
	}
	if d := m.Devices[0]; d.PCIAddress != "0000:0a:00.0" || d.MemTotalMiB != 49152 {
		t.Errorf("device 0: %+v", d)
	}
	if d := m.Devices[16]; d.PCIAddress != "0001:0b:00.0" {
		t.Errorf("device 16 (domain 1): %q", d.PCIAddress)
	}
	if l := m.Link(0, 3); l.Weight != 13 || l.MaxBandwidth != 819200 {
		t.Errorf("intra-GPU link: %+v", *l)
	}
	if l := m.Link(0, 16); l.Weight != 41 || l.Type != topology.LinkXGMI || !l.Assumed {
		t.Errorf("cross-GPU link: %+v", *l)
	}
}

func TestReadTwoNodeCopy(t *testing.T) {
	var warns []string
	m, err := Read(fixture(t, "topology-parsing"), collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 2 {
		t.Fatalf("%d devices", m.N())
	}
	d := m.Devices[0]
	if d.Name != "AMD GPU 0x6860" || d.PCIAddress != "0000:19:00.0" || d.MemTotalMiB != 16368 ||
		d.NUMANode != 0 || d.UniqueID != "0xc34ec50444dd0a6c" || d.Hive != "" {
		t.Errorf("device 0: %+v", d)
	}
	// Node 2 is a copy of node 1: its link still says node_from 1, and
	// both have one PCI address. Both are reported, neither is fatal.
	want := []string{
		"kfd: topology/nodes/2/io_links/0/properties: node_from 1 in node 2's directory",
		"kfd: devices 0 and 1 have the same identity 0000:19:00.0",
	}
	if !reflect.DeepEqual(warns, want) {
		t.Errorf("warnings %q, want %q", warns, want)
	}
	if l := m.Link(0, 1); l.Type != topology.LinkPCIe || l.Direct {
		t.Errorf("link %+v", *l)
	}
}

func TestReadRootLevels(t *testing.T) {
	// The same tree found from the KFD root, from topology/ and from a
	// live-system layout.
	base := testutil.KFD(t, "topo-mi210-xgmi-pcie")
	live := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(base), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(os.DirFS(base), p)
		live["sys/class/kfd/kfd/topology/"+p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The MI210 tree has 8 GPUs, the MI300X CPX tree 63 partitions; each
	// layout must find exactly its tree's count.
	for _, tt := range []struct {
		name string
		fsys fs.FS
		want int
	}{
		{"nodes", os.DirFS(base), 8},
		{"topology", fixture(t, "topo-mi300-cpx"), 63},
		{"inside tree", os.DirFS(testutil.KFD(t, "topo-mi300-cpx", "topology")), 63},
		{"live", live, 8},
	} {
		m, err := Read(tt.fsys, nil)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if m.N() != tt.want {
			t.Errorf("%s: %d devices, want %d", tt.name, m.N(), tt.want)
		}
	}
}

// gpuNode is the properties of a small MI210-like GPU node.
func gpuNode(loc, unique, hive int) string {
	return fmt.Sprintf("cpu_cores_count 0\nsimd_count 416\ngfx_target_version 90010\ndevice_id 29711\n"+
		"location_id %d\ndomain 0\nhive_id %d\nunique_id %d\n", loc, hive, unique)
}

func link(typ, from, to, weight, bw, flags int) string {
	return fmt.Sprintf("type %d\nnode_from %d\nnode_to %d\nweight %d\nmin_bandwidth %d\nmax_bandwidth %d\nflags %d\n",
		typ, from, to, weight, bw, bw, flags)
}

// smallTree is one CPU node and two XGMI-linked GPU nodes under nodes/.
func smallTree() fstest.MapFS {
	f := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	return fstest.MapFS{
		"nodes/0/properties":            f("cpu_cores_count 16\nsimd_count 0\n"),
		"nodes/1/properties":            f(gpuNode(0x0300, 11, 7)),
		"nodes/1/io_links/0/properties": f(link(2, 1, 0, 20, 32000, 1)),
		"nodes/1/io_links/1/properties": f(link(11, 1, 2, 15, 50000, 1)),
		"nodes/2/properties":            f(gpuNode(0x2300, 22, 7)),
		"nodes/2/io_links/0/properties": f(link(2, 2, 0, 20, 32000, 1)),
		"nodes/2/io_links/1/properties": f(link(11, 2, 1, 15, 50000, 1)),
	}
}

func TestReadHoles(t *testing.T) {
	f := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name   string
		edit   func(fstest.MapFS)
		source string // ParseError.Source, or "" for another error
		sent   error
		msg    string // part of the message
	}{
		{name: "no nodes dir", edit: func(m fstest.MapFS) {
			for k := range m {
				delete(m, k)
			}
			m["sys/class/drm/card0"] = f("")
		}, sent: ErrNoKFD, msg: "kfd: no KFD topology: none of sys/class/kfd/kfd/topology/nodes, topology/nodes, nodes found"},
		{name: "node without properties", edit: func(m fstest.MapFS) {
			delete(m, "nodes/2/properties")
		}, sent: fs.ErrNotExist, msg: "nodes/2/properties"},
		{name: "link without properties", edit: func(m fstest.MapFS) {
			delete(m, "nodes/1/io_links/1/properties")
			m["nodes/1/io_links/1/stray"] = f("")
		}, sent: fs.ErrNotExist, msg: "nodes/1/io_links/1/properties"},
		{name: "link to missing node", edit: func(m fstest.MapFS) {
			m["nodes/1/io_links/1/properties"] = f(link(11, 1, 9, 15, 50000, 1))
		}, source: "kfd nodes/1/io_links/1/properties", sent: topology.ErrSyntax, msg: "node_to 9: no such node in nodes"},
		{name: "link without node_to", edit: func(m fstest.MapFS) {
			m["nodes/2/io_links/0/properties"] = f("type 2\nweight 20\n")
		}, source: "kfd nodes/2/io_links/0/properties", sent: topology.ErrSyntax, msg: "no node_to"},
		{name: "non-numeric value", edit: func(m fstest.MapFS) {
			m["nodes/1/properties"] = f("cpu_cores_count 0\nsimd_count many\n")
		}, source: "kfd nodes/1/properties", sent: topology.ErrBadNumber, msg: "kfd nodes/1/properties: line 2, column 12: not a number"},
		{name: "no GPU", edit: func(m fstest.MapFS) {
			for k := range m {
				if !strings.HasPrefix(k, "nodes/0/") {
					delete(m, k)
				}
			}
		}, source: "kfd nodes", sent: topology.ErrNoDevices},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := smallTree()
			tt.edit(fsys)
			m, err := Read(fsys, nil)
			if err == nil {
				t.Fatalf("no error; model %v", m)
			}
			if !errors.Is(err, tt.sent) {
				t.Errorf("error %v does not wrap %v", err, tt.sent)
			}
			if !strings.Contains(err.Error(), tt.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, tt.msg)
			}
			var pe *topology.ParseError
			if tt.source != "" && (!errors.As(err, &pe) || pe.Source != tt.source) {
				t.Errorf("error %v: want *ParseError with source %q", err, tt.source)
			}
		})
	}
}

func TestReadWarnings(t *testing.T) {
	f := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name  string
		edit  func(fstest.MapFS)
		check func(*testing.T, *topology.Model)
		warns []string
	}{
		{name: "GPU without CPU link", edit: func(m fstest.MapFS) {
			delete(m, "nodes/2/io_links/0/properties")
		}, check: func(t *testing.T, m *topology.Model) {
			if m.Devices[1].NUMANode != -1 || m.Devices[0].NUMANode != 0 {
				t.Errorf("NUMA nodes %d, %d", m.Devices[0].NUMANode, m.Devices[1].NUMANode)
			}
		}, warns: []string{"kfd: nodes/2: GPU node has no link to a CPU node; NUMA node unknown"}},
		{name: "disabled XGMI link both ways", edit: func(m fstest.MapFS) {
			m["nodes/1/io_links/1/properties"] = f(link(11, 1, 2, 15, 50000, 0))
			m["nodes/2/io_links/1/properties"] = f(link(11, 2, 1, 15, 50000, 0))
		}, check: func(t *testing.T, m *topology.Model) {
			if l := m.Link(0, 1); l.Type != topology.LinkPCIe || l.Direct || !l.Assumed {
				t.Errorf("link %+v, want the host path", *l)
			}
		}, warns: []string{"kfd: nodes/1/io_links/1/properties: link from node 1 to node 2 is disabled (flags 0); the pair uses the host path",
			"kfd: nodes/2/io_links/1/properties: link from node 2 to node 1 is disabled (flags 0); the pair uses the host path"}},
		{name: "flags never set (old kernel)", edit: func(m fstest.MapFS) {
			m["nodes/1/io_links/0/properties"] = f(link(2, 1, 0, 20, 32000, 0))
			m["nodes/2/io_links/0/properties"] = f(link(2, 2, 0, 20, 32000, 0))
			m["nodes/1/io_links/1/properties"] = f(link(11, 1, 2, 15, 50000, 0))
			m["nodes/2/io_links/1/properties"] = f(link(11, 2, 1, 15, 50000, 0))
		}, check: func(t *testing.T, m *topology.Model) {
			if l := m.Link(0, 1); l.Type != topology.LinkXGMI || !l.Direct {
				t.Errorf("link %+v, want XGMI", *l)
			}
		}},
		{name: "stray entry", edit: func(m fstest.MapFS) {
			m["nodes/README"] = f("x")
		}, warns: []string{`kfd: nodes: ignoring unexpected entry "README"`}},
		{name: "unknown link type", edit: func(m fstest.MapFS) {
			m["nodes/1/io_links/1/properties"] = f(link(9, 1, 2, 15, 50000, 1))
			m["nodes/2/io_links/1/properties"] = f(link(9, 2, 1, 15, 50000, 1))
		}, check: func(t *testing.T, m *topology.Model) {
			if l := m.Link(0, 1); l.Type != topology.LinkPCIe {
				t.Errorf("link %+v", *l)
			}
		}, warns: []string{"kfd: nodes/1/io_links/1/properties: unknown link type 9 between GPU nodes 1 and 2; ignored",
			"kfd: nodes/2/io_links/1/properties: unknown link type 9 between GPU nodes 2 and 1; ignored"}},
		{name: "min above max", edit: func(m fstest.MapFS) {
			m["nodes/1/io_links/1/properties"] = f("type 11\nnode_to 2\nweight 15\nmin_bandwidth 90000\nmax_bandwidth 50000\nflags 1\n")
			delete(m, "nodes/2/io_links/1/properties")
		}, check: func(t *testing.T, m *topology.Model) {
			if l := m.Link(0, 1); l.MinBandwidth != 50000 || l.MaxBandwidth != 50000 {
				t.Errorf("link %+v", *l)
			}
		}, warns: []string{"kfd: nodes/1/io_links/1/properties: min_bandwidth 90000 above max_bandwidth 50000; using max"}},
		{name: "memory-only node", edit: func(m fstest.MapFS) {
			m["nodes/3/properties"] = f("cpu_cores_count 0\nsimd_count 0\nmem_banks_count 1\n")
		}, check: func(t *testing.T, m *topology.Model) {
			if m.N() != 2 {
				t.Errorf("%d devices", m.N())
			}
		}, warns: []string{"kfd: nodes/3: node has neither CPU cores nor SIMDs; ignored"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := smallTree()
			tt.edit(fsys)
			var warns []string
			m, err := Read(fsys, collect(&warns))
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, m)
			}
			if !reflect.DeepEqual(warns, tt.warns) {
				t.Errorf("warnings %q, want %q", warns, tt.warns)
			}
		})
	}
}

func TestReadHostNUMA(t *testing.T) {
	// A live-layout root: KFD plus sys/devices/system/node, where NUMA
	// node 1 has memory but no CPUs, so KFD's second CPU node is NUMA 2.
	f := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	const k = "sys/class/kfd/kfd/topology/nodes/"
	fsys := fstest.MapFS{
		k + "0/properties":                      f("cpu_cores_count 4\nsimd_count 0\n"),
		k + "1/properties":                      f("cpu_cores_count 4\nsimd_count 0\n"),
		k + "2/properties":                      f(gpuNode(0x0300, 11, 0)),
		k + "2/io_links/0/properties":           f(link(2, 2, 0, 20, 32000, 1)),
		k + "3/properties":                      f(gpuNode(0x8300, 22, 0)),
		k + "3/io_links/0/properties":           f(link(2, 3, 1, 20, 32000, 1)),
		k + "3/p2p_links/0/properties":          f(link(2, 3, 2, 52, 0, 1)),
		"sys/devices/system/node/node0/cpulist": f("0-3\n"),
		"sys/devices/system/node/node1/cpulist": f("\n"),
		"sys/devices/system/node/node2/cpulist": f("4-7\n"),
		"sys/devices/system/node/online":        f("0-2\n"),
	}
	var warns []string
	m, err := Read(fsys, collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings %q", warns)
	}
	if len(m.NUMANodes) != 3 {
		t.Fatalf("NUMA nodes %+v", m.NUMANodes)
	}
	d0, d1 := m.Devices[0], m.Devices[1]
	if d0.NUMANode != 0 || !reflect.DeepEqual(d0.CPUs, []int{0, 1, 2, 3}) ||
		d1.NUMANode != 2 || !reflect.DeepEqual(d1.CPUs, []int{4, 5, 6, 7}) {
		t.Errorf("devices %+v %+v", d0, d1)
	}
	if l := m.Link(0, 1); l.Level != topology.LevelSYS || l.Weight != 52 || l.Direct || l.Hops != 3 {
		t.Errorf("p2p link %+v", *l)
	}
}

func TestReadProcs(t *testing.T) {
	fsys := os.DirFS(testutil.Testdata(t, "kfd", "procs"))
	m, err := Read(fsys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 4 || m.Devices[0].MemTotalMiB != 65520 {
		t.Fatalf("model %v, device 0 %+v", m, m.Devices[0])
	}
	if err := ReadProcs(fsys, m); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		busy   bool
		procs  int
		used   int64
		reason string
	}{
		{true, 1, 2048, "pid 4242 holds 2048 MiB VRAM"},
		{true, 2, 1536, "pids 4242, 5151 hold 1536 MiB VRAM"},
		{true, 1, 0, "pid 5151 holds compute queues"},
		{false, 0, 0, ""},
	}
	for i, w := range want {
		d := m.Devices[i]
		if d.Busy != w.busy || d.Processes != w.procs || d.MemUsedMiB != w.used || d.BusyReason != w.reason {
			t.Errorf("device %d: busy %v procs %d used %d reason %q; want %+v", i, d.Busy, d.Processes, d.MemUsedMiB, d.BusyReason, w)
		}
	}
	if err := m.Validate(); err != nil {
		t.Error(err)
	}
}

func TestReadProcsErrors(t *testing.T) {
	f := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	// No proc directory: nothing is busy, even without gpu_id files.
	m, err := Read(fixture(t, "topo-mi210-xgmi-pcie"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReadProcs(fixture(t, "topo-mi210-xgmi-pcie"), m); err != nil {
		t.Errorf("no proc dir: %v", err)
	}

	tree := func() fstest.MapFS {
		fs := smallTree()
		fs["nodes/1/gpu_id"] = f("100\n")
		fs["nodes/2/gpu_id"] = f("200\n")
		fs["proc/77/vram_100"] = f("4096\n")
		return fs
	}
	small, err := Read(tree(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := tree()
	bad["proc/77/vram_200"] = f("lots\n")
	err = ReadProcs(bad, small)
	var pe *topology.ParseError
	if !errors.As(err, &pe) || pe.Source != "kfd proc/77/vram_200" || !errors.Is(err, topology.ErrBadNumber) {
		t.Errorf("bad vram: %v", err)
	}
	noID := tree()
	delete(noID, "nodes/2/gpu_id")
	if err := ReadProcs(noID, small); err == nil || !strings.Contains(err.Error(), "nodes/2/gpu_id") {
		t.Errorf("missing gpu_id: %v", err)
	}
	if err := ReadProcs(tree(), m); err == nil || !strings.Contains(err.Error(), "has 2 GPU nodes but the model has 8 devices") {
		t.Errorf("other model: %v", err)
	}
	if err := ReadProcs(fstest.MapFS{}, small); !errors.Is(err, ErrNoKFD) {
		t.Errorf("empty root: %v", err)
	}
	// 4096 bytes is under a MiB but still marks the device busy.
	if err := ReadProcs(tree(), small); err != nil || !small.Devices[0].Busy ||
		small.Devices[0].BusyReason != "pid 77 holds 1 MiB VRAM" || small.Devices[1].Busy {
		t.Errorf("small use: %v %+v", err, small.Devices[0])
	}
}

func TestGFXName(t *testing.T) {
	for v, want := range map[uint64]string{90010: "gfx90a", 90402: "gfx942", 90008: "gfx908", 110000: "gfx1100", 100300: "gfx1030", 90500: "gfx950"} {
		if got := GFXName(v); got != want {
			t.Errorf("GFXName(%d) = %q, want %q", v, got, want)
		}
	}
}

func BenchmarkReadCPX(b *testing.B) {
	fsys := fixture(b, "topo-mi300-cpx")
	for b.Loop() {
		m, err := Read(fsys, nil)
		if err != nil || m.N() != 63 {
			b.Fatal(err)
		}
	}
}

// TestDirFSMatchesOSDirFS: the fast DirFS reads the same model as os.DirFS.
func TestDirFSMatchesOSDirFS(t *testing.T) {
	for _, tree := range []string{"topo-mi300-cpx", "topo-mi210-xgmi-pcie"} {
		dir := testutil.KFD(t, tree)
		a, err := Read(DirFS(dir), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Read(os.DirFS(dir), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Devices, b.Devices) || !reflect.DeepEqual(a.Links, b.Links) {
			t.Errorf("%s: DirFS and os.DirFS give different models", tree)
		}
	}
	if _, err := DirFS(t.TempDir()).(fs.ReadFileFS).ReadFile("../etc/passwd"); err == nil {
		t.Error("DirFS read a path outside its root")
	}
}

// cgroupFS answers EPERM for what amdkfd refuses to a process whose
// device cgroup denies a GPU: the properties, gpu_id and name of its node
// and everything under it, the way sysfs read() fails after a good open.
type cgroupFS struct {
	fs.FS
	denied map[string]bool // node directories, "nodes/3"
}

func (c cgroupFS) deny(name string) bool {
	for d := range c.denied {
		if strings.HasPrefix(name, d+"/") && !strings.HasSuffix(name, "_links") && !strings.HasSuffix(name, "mem_banks") {
			if b := path.Base(name); b == "properties" || b == "gpu_id" || b == "name" {
				return true
			}
		}
	}
	return false
}

func (c cgroupFS) ReadFile(name string) ([]byte, error) {
	if c.deny(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EPERM}
	}
	return fs.ReadFile(c.FS, name)
}

func (c cgroupFS) Open(name string) (fs.File, error) {
	if c.deny(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EPERM}
	}
	return c.FS.Open(name)
}

// TestReadUnderDeviceCgroup: a job given GPUs 4 and 5 of the MI210 node
// (KFD nodes 6 and 7, hive B on NUMA node 1), as Slurm's task/cgroup with
// ConstrainDevices=yes leaves it, sees two devices numbered 0 and 1, as
// HIP does there, joined by their XGMI link, and no error.
func TestReadUnderDeviceCgroup(t *testing.T) {
	denied := map[string]bool{}
	for _, n := range []int{2, 3, 4, 5, 8, 9} {
		denied[fmt.Sprintf("nodes/%d", n)] = true
	}
	fsys := cgroupFS{FS: fixture(t, "topo-mi210-xgmi-pcie"), denied: denied}
	if _, err := fs.ReadFile(fsys, "nodes/3/properties"); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("the test file system does not deny: %v", err)
	}
	var warns []string
	m, err := Read(fsys, collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	if m.N() != 2 {
		t.Fatalf("%d devices, want 2", m.N())
	}
	for i, pci := range []string{"0000:e3:00.0", "0000:c3:00.0"} {
		d := m.Devices[i]
		if d.Index != i || d.RuntimeIndex != i || d.PCIAddress != pci || d.NUMANode != 1 || d.Hive != "0xfb11632c00f4d272" {
			t.Errorf("device %d: %+v, want runtime index %d at %s on NUMA node 1", i, d, i, pci)
		}
	}
	if l := m.Link(0, 1); l.Type != topology.LinkXGMI || !l.Direct || l.MaxBandwidth != 50000 {
		t.Errorf("link 0-1: %+v, want direct XGMI at 50000 MB/s", *l)
	}
}

// TestReadProcsUnderDeviceCgroup: the gpu_id list ReadProcs matches
// processes with leaves the denied GPU nodes out too, so it lines up
// with Read's devices.
func TestReadProcsUnderDeviceCgroup(t *testing.T) {
	base := fixture(t, "topology-parsing-mi308")
	all := gpuIDsOf(t, base, 32)
	// Deny every GPU node but the third and fourth.
	denied := map[string]bool{}
	nodes, err := numericEntries(base, "topology/nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	gpu := 0
	for _, n := range nodes {
		dir := fmt.Sprintf("topology/nodes/%d", n)
		p, _, err := readNodeProps(base, dir)
		if err != nil || p["simd_count"] == 0 {
			continue
		}
		if gpu != 2 && gpu != 3 {
			denied[dir] = true
		}
		gpu++
	}
	fsys := cgroupFS{FS: base, denied: denied}
	ids := gpuIDsOf(t, fsys, 2)
	m, err := Read(fsys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 2 || ids[0] != all[2] || ids[1] != all[3] {
		t.Errorf("gpu ids %v for %d devices, want [%d %d] of %v", ids, m.N(), all[2], all[3], all)
	}
}

// gpuIDsOf lists the gpu_id of each of the n devices of the tree, by
// device index.
func gpuIDsOf(t *testing.T, fsys fs.FS, n int) []uint64 {
	t.Helper()
	devOf, err := gpuDevices(fsys, "topology/nodes", n)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, n)
	for g, i := range devOf {
		ids[i] = g
	}
	return ids
}
