package topology

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// twoHives is a small model: 0-1 XGMI, 2 alone on NUMA 1; 0-2 and 1-2 are
// left for Finish to fill as host PCIe.
func twoHives() *Model {
	return &Model{
		Source: "test",
		Devices: []Device{
			{Index: 0, NUMANode: 0}, {Index: 1, RuntimeIndex: 1, NUMANode: 0},
			{Index: 2, RuntimeIndex: 2, NUMANode: 1, Processes: 1},
		},
		Links:     []Link{{A: 1, B: 0, Type: LinkXGMI, Weight: 15, Hops: 1, Direct: true}},
		NUMANodes: []NUMANode{{ID: 0, CPUs: []int{0, 1}}, {ID: 1, CPUs: []int{2, 3}}},
	}
}

func TestFinishCompletesAndAssumes(t *testing.T) {
	m := twoHives()
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	if len(m.Links) != 3 {
		t.Fatalf("%d links, want 3 (every pair)", len(m.Links))
	}
	l := m.Link(0, 1)
	if l.A != 0 || l.B != 1 || l.MaxBandwidth != XGMILinkBandwidth || !l.Assumed || !l.Direct {
		t.Errorf("0-1 = %+v, want ordered XGMI with assumed %d MB/s", *l, XGMILinkBandwidth)
	}
	// 0 and 2 sit on different NUMA nodes: the undescribed pair is SYS,
	// at the SYS assumption (half the host bandwidth), as every source says.
	h := m.Link(2, 0)
	if h.Direct || h.Type != LinkPCIe || h.Level != LevelSYS || h.MaxBandwidth != DefaultHostBandwidth/2 || !h.Assumed {
		t.Errorf("0-2 = %+v, want assumed host PCIe SYS at %d", *h, DefaultHostBandwidth/2)
	}
	if m.BW(0, 1) != 50000 || m.BW(1, 0) != 50000 || m.BW(0, 0) != 0 {
		t.Errorf("BW symmetric lookups wrong")
	}
	if !reflect.DeepEqual(m.Devices[2].CPUs, []int{2, 3}) {
		t.Errorf("device 2 CPUs %v, want its NUMA node's 2,3", m.Devices[2].CPUs)
	}
	if !m.Devices[2].Busy || m.Devices[0].Busy {
		t.Errorf("busy = %v %v, want only device 2 (it has a process)", m.Devices[0].Busy, m.Devices[2].Busy)
	}
}

// One assumption for undescribed pairs whatever the source: PHB on one
// NUMA node, SYS across two; a source's own PCIe label is kept when finer
// than PHB, and a NUMA node learnt after Finish (SetNUMANodes) applies too.
func TestFinishNUMARule(t *testing.T) {
	m := &Model{Source: "test", Devices: []Device{
		{Index: 0, NUMANode: 0}, {Index: 1, RuntimeIndex: 1, NUMANode: 0},
		{Index: 2, RuntimeIndex: 2, NUMANode: 1}, {Index: 3, RuntimeIndex: 3, NUMANode: -1},
		{Index: 4, RuntimeIndex: 4, NUMANode: 1}},
		Links: []Link{
			{A: 0, B: 2, Type: LinkPCIe, Level: "PCIE"},                        // amd-smi's label
			{A: 1, B: 2, Type: LinkPCIe, Level: LevelPHB, MaxBandwidth: 20000}, // a figure from the source
			{A: 0, B: 4, Type: LinkPCIe, Level: LevelNODE},                     // finer than PHB: kept
		}}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		a, b  int
		level string
		bw    int64
		loc   Locality
	}{
		{0, 1, LevelPHB, 32000, LocalityPHB},
		{0, 2, LevelSYS, 16000, LocalitySYS},
		{1, 2, LevelSYS, 20000, LocalitySYS},
		{0, 4, LevelNODE, 24000, LocalityNODE},
		{2, 4, LevelPHB, 32000, LocalityPHB},
		{0, 3, LevelPHB, 32000, LocalityPHB}, // NUMA unknown: no claim
	}
	for _, tt := range tests {
		l := m.Link(tt.a, tt.b)
		if l.Level != tt.level || l.MaxBandwidth != tt.bw || m.Locality(tt.a, tt.b) != tt.loc {
			t.Errorf("%d-%d = %s %d MB/s locality %d, want %s %d locality %d", tt.a, tt.b, l.Level, l.MaxBandwidth, m.Locality(tt.a, tt.b), tt.level, tt.bw, tt.loc)
		}
	}
	m.Devices[3].NUMANode = 1
	m.SetNUMANodes([]NUMANode{{ID: 0}, {ID: 1}})
	if l := m.Link(0, 3); l.Level != LevelSYS || l.MaxBandwidth != 16000 {
		t.Errorf("0-3 after its NUMA node became known: %s %d", l.Level, l.MaxBandwidth)
	}
}

// Locality ranks package > hive > other fabric > PIX > PXB > PHB > NODE > SYS.
func TestLocality(t *testing.T) {
	m := &Model{Source: "test", Devices: []Device{
		{Index: 0, NUMANode: 0, Package: "p0", Hive: "h"}, {Index: 1, RuntimeIndex: 1, NUMANode: 0, Package: "p0", Hive: "h"},
		{Index: 2, RuntimeIndex: 2, NUMANode: 0, Hive: "h"}, {Index: 3, RuntimeIndex: 3, NUMANode: 0},
		{Index: 4, RuntimeIndex: 4, NUMANode: 0}, {Index: 5, RuntimeIndex: 5, NUMANode: 0}},
		Links: []Link{
			{A: 0, B: 1, Type: LinkXGMI}, {A: 0, B: 2, Type: LinkXGMI}, {A: 2, B: 3, Type: LinkNVLink},
			{A: 3, B: 4, Type: LinkPCIe, Level: LevelPIX}, {A: 3, B: 5, Type: LinkPCIe, Level: LevelPXB},
		}}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	want := map[[2]int]Locality{{0, 1}: LocalityPackage, {0, 2}: LocalityHive, {2, 3}: LocalityFabric,
		{3, 4}: LocalityPIX, {3, 5}: LocalityPXB, {4, 5}: LocalityPHB}
	for p, loc := range want {
		if got := m.Locality(p[1], p[0]); got != loc {
			t.Errorf("%v: locality %d, want %d", p, got, loc)
		}
	}
	if m.Locality(0, 0) != LocalitySYS || m.Locality(0, 9) != LocalitySYS {
		t.Errorf("locality of a device with itself or an unknown one")
	}
}

func TestFinishRejects(t *testing.T) {
	for name, mod := range map[string]func(*Model){
		"duplicate pair": func(m *Model) { m.Links = append(m.Links, Link{A: 0, B: 1, Type: LinkPCIe}) },
		"self link":      func(m *Model) { m.Links = append(m.Links, Link{A: 2, B: 2, Type: LinkPCIe}) },
		"out of range":   func(m *Model) { m.Links = append(m.Links, Link{A: 0, B: 7, Type: LinkPCIe}) },
		"index mismatch": func(m *Model) { m.Devices[1].Index = 5 },
		"unknown type":   func(m *Model) { m.Links[0].Type = "carrier-pigeon" },
		"bad numa":       func(m *Model) { m.Devices[0].NUMANode = -4 },
		"min above max":  func(m *Model) { m.Links[0].MinBandwidth, m.Links[0].MaxBandwidth = 9, 5 },
		"duplicate numa": func(m *Model) { m.NUMANodes[1].ID = 0 },
		"no devices":     func(m *Model) { m.Devices, m.Links = nil, nil },
	} {
		t.Run(name, func(t *testing.T) {
			m := twoHives()
			mod(m)
			err := m.Finish()
			if !errors.Is(err, ErrInvalidModel) {
				t.Fatalf("Finish = %v, want ErrInvalidModel", err)
			}
		})
	}
}

func TestJSONRoundTrip(t *testing.T) {
	m := twoHives()
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"index"`, `"numa_node"`, `"busy"`, `"a"`, `"b"`, `"type"`, `"max_bandwidth_mb_s"`, `"direct"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("saved JSON lacks %s", key)
		}
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	back.pair, m.pair = nil, nil
	if !reflect.DeepEqual(back, m) {
		t.Errorf("round trip differs:\n%+v\n%+v", back, m)
	}
}

func TestReadJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *ParseError
	}{
		// The column is the offending '}' (0-based 14, printed 15).
		{"{\n \"devices\": [\n  {\"index\": 0,}\n ]}", &ParseError{Source: "topology file", Line: 3, Column: 14}},
		{`{"devices": []}`, &ParseError{Source: "topology file", Err: ErrNoDevices}},
	} {
		_, err := ReadJSON(strings.NewReader(tc.in))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Source != tc.want.Source || pe.Line != tc.want.Line || pe.Column != tc.want.Column {
			t.Errorf("ReadJSON(%q) = %v, want %+v", tc.in, err, tc.want)
		}
		if tc.want.Err != nil && !errors.Is(err, tc.want.Err) {
			t.Errorf("ReadJSON(%q) = %v, want %v", tc.in, err, tc.want.Err)
		}
	}
	// A value of the wrong kind is named by its JSON path, not by the Go
	// types it was to fill ("Go struct field Device.devices.index of type
	// int" before).
	for in, want := range map[string]string{
		`{"devices":[{"index":"a"}]}`: "topology file: line 1, column 24: malformed input: devices.index: a string where a whole number belongs",
		`{"devices":"x"}`:             "topology file: line 1, column 14: malformed input: devices: a string where an array belongs",
		`[1]`:                         "topology file: line 1: malformed input: an array where an object belongs",
	} {
		_, err := ReadJSON(strings.NewReader(in))
		if err == nil || err.Error() != want || !errors.Is(err, ErrSyntax) {
			t.Errorf("ReadJSON(%s) = %v\nwant %s", in, err, want)
		}
	}
	_, err := ReadJSON(strings.NewReader(`{"devices":[{"index":0},{"index":1,"runtime_index":1}],"links":[{"a":0,"b":1,"type":"warp"}]}`))
	if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), "warp") {
		t.Errorf("unknown link type: %v", err)
	}
}

func TestCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"":             nil,
		"0":            {0},
		"0-3,8,10-11":  {0, 1, 2, 3, 8, 10, 11},
		"3, 1-2":       {1, 2, 3},
		"0-51,104-155": nil, // checked by length below
	} {
		got, err := ParseCPUList(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if in == "0-51,104-155" {
			if len(got) != 104 || FormatCPUList(got) != in {
				t.Errorf("%q -> %d cpus, %q", in, len(got), FormatCPUList(got))
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q -> %v, want %v", in, got, want)
		}
	}
	for _, bad := range []string{"x", "1-", "3-1", "1,,2", "-1", "0-99999999"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzReadJSON(f *testing.F) {
	m := twoHives()
	_ = m.Finish()
	var buf bytes.Buffer
	_ = WriteJSON(&buf, m)
	f.Add(buf.Bytes())
	f.Add([]byte(`{"devices":[{"index":0}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("ReadJSON accepted an invalid model: %v", err)
		}
	})
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8", "0-51,104-155", "1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		back, err := ParseCPUList(FormatCPUList(cpus))
		if err != nil || !reflect.DeepEqual(back, cpus) {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, cpus, FormatCPUList(cpus), back, err)
		}
	})
}
