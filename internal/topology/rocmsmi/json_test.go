package rocmsmi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

func TestParseJSONMI100(t *testing.T) {
	r := mustReport(t, "rocm-smi-json-alltopo-mi100-6gpu-pcie-rocm571.json")
	if r.DriverVersion != "6.2.4" {
		t.Errorf("driver %q", r.DriverVersion)
	}
	m, _ := mustModel(t, r)
	if m.N() != 6 || len(m.Links) != 15 {
		t.Fatalf("%d devices %d links", m.N(), len(m.Links))
	}
	for _, l := range m.Links {
		if l.Type != topology.LinkPCIe || l.Direct || l.Weight != 40 || l.Hops != 2 || l.Level != topology.LevelPHB {
			t.Errorf("link %d-%d = %+v", l.A, l.B, l)
		}
	}
	d := m.Devices[0]
	if d.PCIAddress != "0000:1e:00.0" || d.UniqueID != "" || d.Name != "Arcturus GL-XL [Instinct MI100]" || d.NUMANode != 0 || d.MemTotalMiB != 34342961152>>20 || d.Busy {
		t.Errorf("device 0 = %+v", d)
	}
	m4, _ := mustModel(t, mustReport(t, "rocm-smi-json-alltopo-mi100-4gpu-pcie-rocm602.json"))
	if got, want := numaOf(m4), []int{1, 1, 1, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("NUMA %v, want %v", got, want)
	}
	if d := m4.Devices[1]; d.UniqueID != "0x4edfb117a17a07d" || d.PCIAddress != "0000:a3:00.0" {
		t.Errorf("device 1 = %+v", d)
	}
}

// Only card0 has an object but the system keys describe DRM devices 0-7.
func TestParseJSONMI50Card0(t *testing.T) {
	m, _ := mustModel(t, mustReport(t, "rocm-smi-json-alltopo-mi50-card0-8dev-topology.json"))
	if m.N() != 8 {
		t.Fatalf("%d devices", m.N())
	}
	if m.Devices[0].PCIAddress != "0000:63:00.0" || m.Devices[0].Name != "Radeon Instinct MI50 32GB" {
		t.Errorf("device 0 = %+v", m.Devices[0])
	}
	if d := m.Devices[5]; d.PCIAddress != "" || d.NUMANode != -1 {
		t.Errorf("device 5 = %+v", d)
	}
	if l := m.Link(0, 1); l.Weight != 40 || l.Level != topology.LevelPHB || l.Direct {
		t.Errorf("0-1 = %+v", *l)
	}
	if l := m.Link(0, 4); l.Weight != 72 || l.Level != topology.LevelSYS || l.MaxBandwidth != topology.DefaultHostBandwidth/2 {
		t.Errorf("0-4 = %+v", *l)
	}
}

func TestParseJSONRX6700XT(t *testing.T) {
	r := mustReport(t, "rocm-smi-json-rx6700xt-rocm430-numa-affinity-4294967295.json")
	d := r.Devices[0]
	if d.NUMAAffinity != -1 || d.NUMANode != 0 || d.Name != "" {
		t.Errorf("report device 0 = %+v", *d)
	}
	m, _ := mustModel(t, r)
	if m.Devices[0].NUMANode != 0 {
		t.Errorf("model NUMA %d, want 0 from Numa Node", m.Devices[0].NUMANode)
	}
	// 1.5 GB of VRAM in use: busy by topology.BusyRule.
	r612 := mustReport(t, "rocm-smi-json-rx6700xt-rocm612.json")
	if d := r612.Devices[0]; d.NUMAAffinity != -1 || d.MemUsedPct != 12 || d.Name != "Navi 22 [Radeon RX 6700/6700 XT / 6800M]" {
		t.Errorf("report device 0 = %+v", *d)
	}
	m612, _ := mustModel(t, r612)
	if d := m612.Devices[0]; !d.Busy || d.MemUsedMiB != 1572745216>>20 {
		t.Errorf("device 0 = %+v", d)
	}
}

func TestParseJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want *topology.ParseError
	}{
		{"syntax", "\n{\"card0\": {\"PCI Bus\": }}",
			&topology.ParseError{Source: "rocm-smi --json", Line: 2, Column: 22,
				Err: wrap(topology.ErrSyntax, "invalid character '}' looking for beginning of value")}},
		{"array (amd-smi)", `[{"gpu": 0}]`,
			&topology.ParseError{Source: "rocm-smi --json", Err: wrap(topology.ErrWrongTool, "top level is a JSON array, not an object")}},
		// Named by the JSON key and kinds, not "Go value of type
		// map[string]json.RawMessage".
		{"card not an object", `{"card0": 5}`,
			&topology.ParseError{Source: "rocm-smi --json", Err: wrap(topology.ErrSyntax, "card0: a number where an object belongs")}},
		{"no cards", `{"gpu": 0}`,
			&topology.ParseError{Source: "rocm-smi --json", Err: wrap(topology.ErrWrongTool, "no cardN or system object")}},
		{"bad weight", `{"system": {"(Topology) Weight between DRM devices 0 and 1": "heavy"}}`,
			&topology.ParseError{Source: "rocm-smi --json",
				Err: wrapKey(`system "(Topology) Weight between DRM devices 0 and 1"`, wrap(topology.ErrBadNumber, `"heavy"`))}},
		{"bad link type", `{"system": {"(Topology) Link type between DRM devices 0 and 1": "NVLINK"}}`,
			&topology.ParseError{Source: "rocm-smi --json",
				Err: wrapKey(`system "(Topology) Link type between DRM devices 0 and 1"`, wrap(topology.ErrUnknownLinkType, `"NVLINK"`))}},
		{"bad use", `{"card1": {"GPU use (%)": "busy"}}`,
			&topology.ParseError{Source: "rocm-smi --json",
				Err: wrapKey(`card1 "GPU use (%)"`, wrap(topology.ErrBadNumber, `percentage "busy"`))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJSON(strings.NewReader(tc.in))
			if !reflect.DeepEqual(err, tc.want) {
				t.Fatalf("err = %#v (%v)\nwant %#v (%v)", err, err, tc.want, tc.want)
			}
		})
	}
}

func TestMergeTextAndJSON(t *testing.T) {
	// JSON gives identity and PCIe weights; a later text run says XGMI.
	r := mustReport(t, "rocm-smi-json-alltopo-mi100-4gpu-pcie-rocm602.json")
	txt, err := ParseText(strings.NewReader("==== Link Type between two GPUs ====\n       GPU0  GPU1\nGPU0   0     XGMI\nGPU1   XGMI  0\n"))
	if err != nil {
		t.Fatal(err)
	}
	r.Merge(txt)
	r.Merge(nil)
	m, _ := mustModel(t, r)
	if l := m.Link(0, 1); l.Type != topology.LinkXGMI || l.Weight != 40 || !l.Direct {
		t.Errorf("0-1 = %+v", *l)
	}
	if l := m.Link(0, 2); l.Type != topology.LinkPCIe {
		t.Errorf("0-2 = %+v", *l)
	}
	if m.Devices[0].PCIAddress != "0000:83:00.0" {
		t.Errorf("device 0 = %+v", m.Devices[0])
	}
	if want := []string{"--json", "--showtopo"}; !reflect.DeepEqual(r.Sections, want) {
		t.Errorf("sections %v, want %v", r.Sections, want)
	}
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
