package amdsmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
	return testutil.ReadFile(t, testutil.Testdata(t, "amd-smi", name))
}

var mi300xBDFs = []string{"0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0", "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0"}
var mi355xBDFs = []string{"0000:0d:00.0", "0000:26:00.0", "0000:5d:00.0", "0000:75:00.0", "0000:8e:00.0", "0000:a7:00.0", "0000:dc:00.0", "0000:f4:00.0"}

// checkAllXGMI asserts every pair of an 8-GPU full mesh.
func checkAllXGMI(t *testing.T, m *topology.Model, weight int, bw int64, assumed bool) {
	t.Helper()
	if len(m.Links) != 28 {
		t.Fatalf("%d links, want 28", len(m.Links))
	}
	for _, l := range m.Links {
		if l.Type != topology.LinkXGMI || !l.Direct || l.Hops != 1 || l.Weight != weight ||
			l.MaxBandwidth != bw || l.MinBandwidth != bw || l.Assumed != assumed {
			t.Fatalf("link %d-%d = %+v, want XGMI direct hops 1 weight %d bandwidth %d assumed %v", l.A, l.B, l, weight, bw, assumed)
		}
	}
}

func TestTopologyTextFixtures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    func(testing.TB) []byte
		bdfs    []string
		weight  int
		bw      int64
		assumed bool
	}{
		{"public MI300X ROCm 6.1", func(t testing.TB) []byte { return public(t, "amd-smi-topology-mi300x-8gpu-xgmi.txt") }, mi300xBDFs, 15, 50000, false},
		{"public MI355X amd-smi 26 (weight 0, NUMA BW 0-0)", func(t testing.TB) []byte { return public(t, "amd-smi-topology-mi355x-8gpu-xgmi.txt") }, mi355xBDFs, 0, topology.XGMILinkBandwidth, true},
		{"hand-made MI300X SPX with legend", func(t testing.TB) []byte { return mine(t, "mi300x-8gpu-spx-topology.txt") }, mi300xBDFs, 15, 50000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, err := ParseTopology(bytes.NewReader(tc.data(t)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(top.BDFs, tc.bdfs) {
				t.Fatalf("BDFs %v, want %v", top.BDFs, tc.bdfs)
			}
			m, err := Build(top, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.Source != "amd-smi" || m.Vendor != topology.VendorAMD || m.N() != 8 {
				t.Fatalf("model source %q devices %d vendor %s", m.Source, m.N(), m.Vendor)
			}
			for i, d := range m.Devices {
				if d.PCIAddress != tc.bdfs[i] || d.RuntimeIndex != i || d.Index != i || d.NUMANode != -1 {
					t.Fatalf("device %d = %+v", i, d)
				}
			}
			checkAllXGMI(t, m, tc.weight, tc.bw, tc.assumed)
		})
	}
}

func TestTopologyTextPairs(t *testing.T) {
	top, err := ParseTopology(bytes.NewReader(public(t, "amd-smi-topology-mi300x-8gpu-xgmi.txt")))
	if err != nil {
		t.Fatal(err)
	}
	want := Pair{Access: "ENABLED", Weight: 15, Hops: 1, Type: "XGMI", MinBW: 50000, MaxBW: 50000}
	if got := top.Pairs[2][7]; got != want {
		t.Errorf("pair 2-7 = %+v, want %+v", got, want)
	}
	if got := top.Pairs[4][4]; got != (Pair{Access: "ENABLED", Weight: 0, Hops: 0, Type: "SELF", MinBW: 0, MaxBW: 0}) {
		t.Errorf("diagonal = %+v", got)
	}
}

func TestTopologyJSONFixtures(t *testing.T) {
	t.Run("legacy 2-GPU PCIe", func(t *testing.T) {
		top, err := ParseTopologyJSON(bytes.NewReader(public(t, "amd-smi-topology-json-legacy-format-2gpu-pcie.json")))
		if err != nil {
			t.Fatal(err)
		}
		want := Pair{Access: "DISABLED", Weight: 40, Hops: 2, Type: "PCIE"}
		if top.Pairs[0][1] != want || top.Pairs[1][0] != want {
			t.Fatalf("pairs %+v / %+v, want %+v", top.Pairs[0][1], top.Pairs[1][0], want)
		}
		if top.BDFs[0] != "" {
			t.Fatalf("old schema has no BDFs, got %q", top.BDFs[0])
		}
		m, err := Build(top, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := m.Link(0, 1)
		if l.Type != topology.LinkPCIe || l.Direct || l.Weight != 40 || l.Hops != 2 || !l.Assumed || l.MaxBandwidth != topology.DefaultHostBandwidth {
			t.Fatalf("link %+v", *l)
		}
	})
	t.Run("new schema -a -t subset", func(t *testing.T) {
		top, err := ParseTopologyJSON(bytes.NewReader(public(t, "amd-smi-topology-a-t-json-2gpu-pcie.json")))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(top.BDFs, []string{"0000:08:00.0", "0000:44:00.0"}) {
			t.Fatalf("BDFs %v", top.BDFs)
		}
		if got := top.Pairs[1][0]; got != (Pair{Access: "DISABLED", Weight: -1, Hops: -1, Type: "PCIE"}) {
			t.Fatalf("pair 1-0 = %+v", got)
		}
		m, err := Build(top, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l := m.Link(0, 1); l.Type != topology.LinkPCIe || l.Direct || l.Hops != 2 { // hops not reported: 2 for PCIe
			t.Fatalf("link %+v", *l)
		}
	})
	t.Run("hand-made MI300X full schema", func(t *testing.T) {
		top, err := ParseTopologyJSON(bytes.NewReader(mine(t, "mi300x-8gpu-spx-topology.json")))
		if err != nil {
			t.Fatal(err)
		}
		m, err := Build(top, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkAllXGMI(t, m, 15, 50000, false)
		if m.Devices[7].PCIAddress != "0000:df:00.0" {
			t.Fatalf("device 7 %+v", m.Devices[7])
		}
	})
}

func TestParseDefaultMI355X(t *testing.T) {
	s, err := ParseDefault(bytes.NewReader(public(t, "amd-smi-default-mi355x-8gpu.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != "26.0.2+39589fda" || len(s.GPUs) != 8 {
		t.Fatalf("version %q, %d GPUs", s.Version, len(s.GPUs))
	}
	hip := []int{1, 3, 2, 0, 5, 7, 6, 4}
	for i, g := range s.GPUs {
		want := GPU{Index: i, BDF: mi355xBDFs[i], Name: "AMD Instinct MI355X", HIPID: hip[i],
			MemUsedMiB: 283, MemTotalMiB: 294896, Processes: 0}
		if g != want {
			t.Errorf("GPU %d = %+v\nwant %+v", i, g, want)
		}
	}
	// The HIP-ID becomes the runtime index.
	top, err := ParseTopology(bytes.NewReader(public(t, "amd-smi-topology-mi355x-8gpu-xgmi.txt")))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(top, s.GPUs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range m.Devices {
		if d.RuntimeIndex != hip[i] || d.Name != "AMD Instinct MI355X" || d.MemTotalMiB != 294896 || d.Busy {
			t.Errorf("device %d = %+v", i, d)
		}
	}
	if m.Devices[3].PCIAddress != "0000:75:00.0" || m.Devices[3].RuntimeIndex != 0 {
		t.Errorf("GPU 3 should be HIP device 0: %+v", m.Devices[3])
	}
}

func TestIdentityHandMade(t *testing.T) {
	js, err := ParseListJSON(bytes.NewReader(mine(t, "mi300x-8gpu-spx-list.json")))
	if err != nil {
		t.Fatal(err)
	}
	want := GPU{Index: 3, BDF: "0000:5c:00.0", UUID: "a3ff74a1-0000-1000-80c7-6f3e2d1a0b13", HIPID: -1, MemUsedMiB: -1, MemTotalMiB: -1, Processes: -1}
	if len(js) != 8 || js[3] != want {
		t.Fatalf("GPU 3 = %+v, want %+v", js[3], want)
	}
	procs, err := ParseProcessJSON(bytes.NewReader(mine(t, "mi300x-8gpu-spx-process.json")))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(procs, map[int]int{0: 0, 1: 0, 2: 0, 3: 2, 4: 0, 5: 1, 6: 0, 7: 0}) {
		t.Fatalf("processes %v", procs)
	}
	mem, err := ParseMemUsageJSON(bytes.NewReader(mine(t, "mi300x-8gpu-spx-metric-mem-usage.json")))
	if err != nil {
		t.Fatal(err)
	}
	if mem[3] != (Memory{UsedMiB: 61722, TotalMiB: 196592}) || mem[0] != (Memory{UsedMiB: 283, TotalMiB: 196592}) || len(mem) != 8 {
		t.Fatalf("memory %v", mem)
	}
	s, err := ParseDefault(bytes.NewReader(mine(t, "mi300x-8gpu-spx-default.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if s.GPUs[3].Processes != 2 || s.GPUs[5].Processes != 1 || s.GPUs[0].Processes != 0 || s.GPUs[3].MemUsedMiB != 61722 {
		t.Fatalf("default table use: %+v", s.GPUs)
	}
}

// fakeRun replays fixtures keyed by argv, like a fake amd-smi would.
func fakeRun(t *testing.T, files map[string]string, calls *[]string) topology.Runner {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		key := strings.Join(append([]string{name}, args...), " ")
		*calls = append(*calls, key)
		f, ok := files[key]
		if !ok {
			return nil, &topology.ToolError{Tool: name, Args: args, ExitCode: 2, Stderr: "amd-smi: error: invalid choice\n"}
		}
		if strings.HasPrefix(f, "public:") {
			return public(t, strings.TrimPrefix(f, "public:")), nil
		}
		return mine(t, f), nil
	}
}

func TestDiscover(t *testing.T) {
	var calls []string
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	run := fakeRun(t, map[string]string{
		"amd-smi topology":       "mi300x-8gpu-spx-topology.txt",
		"amd-smi":                "mi300x-8gpu-spx-default.txt",
		"amd-smi list --json":    "mi300x-8gpu-spx-list.json",
		"amd-smi process --json": "mi300x-8gpu-spx-process.json",
	}, &calls)
	m, err := Discover(context.Background(), run, warn)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"amd-smi topology", "amd-smi", "amd-smi list --json"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q", warnings)
	}
	if m.SourceVersion != "26.0.2+39589fda" || m.Bandwidth != "theoretical" {
		t.Errorf("version %q bandwidth %q", m.SourceVersion, m.Bandwidth)
	}
	d := m.Devices[3]
	if !d.Busy || d.Processes != 2 || d.UniqueID != "a3ff74a1-0000-1000-80c7-6f3e2d1a0b13" || d.PCIAddress != "0000:5c:00.0" || d.RuntimeIndex != 3 {
		t.Errorf("device 3 = %+v", d)
	}
	if m.Devices[0].Busy || !m.Devices[5].Busy {
		t.Errorf("busy: 0 %v, 5 %v", m.Devices[0].Busy, m.Devices[5].Busy)
	}
	checkAllXGMI(t, m, 15, 50000, false)
}

func TestDiscoverOldAmdSmi(t *testing.T) {
	// An amd-smi without the default table: process and memory come from
	// their own commands.
	var calls []string
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	run := fakeRun(t, map[string]string{
		"amd-smi topology":                  "public:amd-smi-topology-mi300x-8gpu-xgmi.txt",
		"amd-smi list --json":               "mi300x-8gpu-spx-list.json",
		"amd-smi process --json":            "mi300x-8gpu-spx-process.json",
		"amd-smi metric --mem-usage --json": "mi300x-8gpu-spx-metric-mem-usage.json",
	}, &calls)
	m, err := Discover(context.Background(), run, warn)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 5 || len(warnings) != 1 || !strings.Contains(warnings[0], "exit status 2: amd-smi: error: invalid choice") {
		t.Errorf("calls %q warnings %q", calls, warnings)
	}
	if d := m.Devices[3]; !d.Busy || d.Processes != 2 || d.MemUsedMiB != 61722 || d.RuntimeIndex != 3 {
		t.Errorf("device 3 = %+v", d)
	}
}

// A failed optional call is one warning that names the call once (it
// read "amd-smi : amd-smi: no GPU devices found"), and empty output says
// it is empty.
func TestDiscoverWarningNamesCallOnce(t *testing.T) {
	var calls, warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	inner := fakeRun(t, map[string]string{
		"amd-smi topology":       "mi300x-8gpu-spx-topology.txt",
		"amd-smi list --json":    "mi300x-8gpu-spx-list.json",
		"amd-smi process --json": "mi300x-8gpu-spx-process.json",
	}, &calls)
	run := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if len(args) == 0 {
			return []byte("\n"), nil // a bare amd-smi that printed nothing
		}
		return inner(ctx, name, args...)
	}
	if _, err := Discover(context.Background(), run, warn); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"amd-smi: empty output: no GPU devices found; continuing without it",
		"amd-smi metric --mem-usage --json: exit status 2: amd-smi: error: invalid choice; continuing without it",
	}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings %q\nwant %q", warnings, want)
	}
}

// The calls to amd-smi must describe the same GPUs: a default table that
// lists 7 of the topology's 8 (cut short) is refused, naming both.
func TestDiscoverCallsAgree(t *testing.T) {
	deflt := mine(t, "mi300x-8gpu-spx-default.txt")
	i := bytes.Index(deflt, []byte("| 0000:df:00.0"))
	j := i + bytes.Index(deflt[i:], []byte("\n"))
	j += bytes.Index(deflt[j+1:], []byte("\n")) + 1 // the GPU's second row
	cut := append(append([]byte{}, deflt[:i]...), deflt[j+1:]...)
	var calls []string
	inner := fakeRun(t, map[string]string{"amd-smi topology": "mi300x-8gpu-spx-topology.txt"}, &calls)
	run := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if len(args) == 0 {
			return cut, nil
		}
		return inner(ctx, name, args...)
	}
	_, err := Discover(context.Background(), run, nil)
	want := "amd-smi: inconsistent input: `amd-smi topology` lists 8 GPU(s), `amd-smi` 7; only `amd-smi topology` has 0000:df:00.0"
	if err == nil || err.Error() != want || !errors.Is(err, topology.ErrInconsistent) {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestDiscoverToolMissing(t *testing.T) {
	run := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return nil, fmt.Errorf("%s: %w", name, topology.ErrToolNotFound)
	}
	if _, err := Discover(context.Background(), run, nil); !errors.Is(err, topology.ErrToolNotFound) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	hdr := "WEIGHT TABLE:\n             0000:0c:00.0 0000:22:00.0\n"
	for _, tc := range []struct {
		name  string
		parse func(string) error
		in    string
		want  *topology.ParseError
	}{
		{"empty", text, "", &topology.ParseError{Source: SourceTopology, Err: topology.ErrEmpty}},
		{"help text", text, "usage: amd-smi [-h]\n", &topology.ParseError{Source: SourceTopology, Err: fmt.Errorf("%w: no amd-smi topology table", topology.ErrWrongTool)}},
		{"bad weight", text, hdr + "0000:0c:00.0 0            x5\n", &topology.ParseError{Source: SourceTopology, Line: 3, Column: 26, Err: fmt.Errorf("WEIGHT TABLE: %w", fmt.Errorf("%w: %q", topology.ErrBadNumber, "x5"))}},
		{"short row", text, hdr + "0000:0c:00.0 0\n", &topology.ParseError{Source: SourceTopology, Line: 3, Column: 14, Err: fmt.Errorf("%w: WEIGHT TABLE row has 1 cells, want 2", topology.ErrNotSquare)}},
		{"missing row", text, hdr + "0000:0c:00.0 0 15\n", &topology.ParseError{Source: SourceTopology, Line: 3, Err: fmt.Errorf("%w: WEIGHT TABLE has 1 of 2 rows", topology.ErrTruncated)}},
		{"wrong row label", text, hdr + "0000:22:00.0 0 15\n", &topology.ParseError{Source: SourceTopology, Line: 3, Err: fmt.Errorf("%w: WEIGHT TABLE row 0 is labelled %q, want 0000:0c:00.0", topology.ErrSyntax, "0000:22:00.0")}},
		{"bad header", text, "HOPS TABLE:\n   GPU0 GPU1\n", &topology.ParseError{Source: SourceTopology, Line: 2, Column: 3, Err: fmt.Errorf("%w: HOPS TABLE header: %q is not a PCI address", topology.ErrSyntax, "GPU0")}},
		{"unknown link type", text, "LINK TYPE TABLE:\n a:0.0 b:0.0\na:0.0 SELF NVLINK\nb:0.0 XGMI SELF\n", &topology.ParseError{Source: SourceTopology, Line: 3, Column: 11, Err: fmt.Errorf("LINK TYPE TABLE: %w", fmt.Errorf("%w: %q", topology.ErrUnknownLinkType, "NVLINK"))}},
		{"bad bandwidth", text, "NUMA BW TABLE:\n a:0.0 b:0.0\na:0.0 N/A 5-x\n", &topology.ParseError{Source: SourceTopology, Line: 3, Column: 10, Err: fmt.Errorf("NUMA BW TABLE: %w", fmt.Errorf("%w: bandwidth %q", topology.ErrBadNumber, "5-x"))}},
		{"tables disagree", text, hdr + "0000:0c:00.0 0 15\n0000:22:00.0 15 0\nHOPS TABLE:\n 0000:0c:00.0\n", &topology.ParseError{Source: SourceTopology, Line: 6, Err: fmt.Errorf("%w: HOPS TABLE has 1 columns, the first table 2", topology.ErrNotSquare)}},
		{"json syntax", topoJSON, "[\n  {\"gpu\": 0,,}\n]", &topology.ParseError{Source: SourceTopologyJSON, Line: 2, Column: 12 /* the second comma */, Err: fmt.Errorf("%w: invalid character ',' looking for beginning of object key string", topology.ErrSyntax)}},
		{"json truncated", topoJSON, "[{\"gpu\": 0, \"links\": [", &topology.ParseError{Source: SourceTopologyJSON, Line: 1, Column: 22, Err: fmt.Errorf("%w: JSON document ends early", topology.ErrTruncated)}},
		{"json unknown gpu", topoJSON, `[{"gpu": 0, "links": [{"gpu": 4, "link_type": "XGMI"}]}]`, &topology.ParseError{Source: SourceTopologyJSON, Err: fmt.Errorf("gpu 0: links[0]: %w", fmt.Errorf("%w: unknown gpu 4", topology.ErrSyntax))}},
		{"json bad hops", topoJSON, `[{"gpu": 0, "hops": {"gpu_0": "two"}}]`, &topology.ParseError{Source: SourceTopologyJSON, Err: fmt.Errorf("gpu 0: hops gpu_0: %w", fmt.Errorf("%w: num_hops two", topology.ErrBadNumber))}},
		{"json not a list", topoJSON, `{"error": "no GPUs"}`, &topology.ParseError{Source: SourceTopologyJSON, Err: fmt.Errorf("%w: top level is not a list", topology.ErrWrongTool)}},
		{"default help", deflt, "usage: amd-smi [-h]  ...\n", &topology.ParseError{Source: SourceDefault, Err: fmt.Errorf("%w: no amd-smi GPU table", topology.ErrWrongTool)}},
		{"default cut", deflt, "| 0000:0d:00.0    AMD Instinct MI355X | N/A |\n", &topology.ParseError{Source: SourceDefault, Line: 1, Err: fmt.Errorf("%w: GPU 0000:0d:00.0 has no second row", topology.ErrTruncated)}},
		{"process no gpu", procs, `[{"process_list": []}]`, &topology.ParseError{Source: SourceProcessJSON, Err: fmt.Errorf("%w: element 0 has no \"gpu\"", topology.ErrSyntax)}},
		{"memory unit", memory, `[{"gpu": 0, "mem_usage": {"used_vram": {"value": 1, "unit": "furlong"}, "total_vram": 8}}]`, &topology.ParseError{Source: SourceMemUsageJSON, Err: fmt.Errorf("gpu 0: %w", fmt.Errorf("%w: memory unit %q", topology.ErrSyntax, "FURLONG"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse(tc.in)
			var pe *topology.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if pe.Source != tc.want.Source || pe.Line != tc.want.Line || pe.Column != tc.want.Column || pe.Err.Error() != tc.want.Err.Error() {
				t.Fatalf("err = %#v (%v)\nwant %#v (%v)", *pe, pe, *tc.want, tc.want)
			}
			if !errors.Is(err, unwrapAll(tc.want.Err)) {
				t.Fatalf("errors.Is fails for %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
		})
	}
}

// The old `topology --json` schema names no BDFs: with a default table
// that does, Discover (its fallback reader) takes identities by index
// rather than calling the two inconsistent; it compared "" with the
// table's addresses.
func TestDiscoverOldJSONSchemaWithDefaultTable(t *testing.T) {
	var calls, warns []string
	run := fakeRun(t, map[string]string{
		"amd-smi topology --json": "public:amd-smi-topology-json-legacy-format-2gpu-pcie.json",
		"amd-smi":                 "public:amd-smi-default-mi300x-dpx-excerpt-3dev-rocm-amdsmi132.txt",
	}, &calls)
	m, err := Discover(context.Background(), run, collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 2 || m.Devices[1].PCIAddress != "0000:05:00.1" {
		t.Fatalf("devices %+v", m.Devices)
	}
}

// unwrapAll returns the innermost error (the sentinel).
func unwrapAll(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func text(s string) error     { _, err := ParseTopology(strings.NewReader(s)); return err }
func topoJSON(s string) error { _, err := ParseTopologyJSON(strings.NewReader(s)); return err }
func deflt(s string) error    { _, err := ParseDefault(strings.NewReader(s)); return err }
func procs(s string) error    { _, err := ParseProcessJSON(strings.NewReader(s)); return err }
func memory(s string) error   { _, err := ParseMemUsageJSON(strings.NewReader(s)); return err }

// TestEveryPublicFixture runs every amd-smi parser over every public
// amd-smi capture: each either parses or is refused with a one-line
// ParseError, never a panic.
func TestEveryPublicFixture(t *testing.T) {
	files, err := filepath.Glob(testutil.Public(t, "amd-smi-*"))
	if err != nil || len(files) < 15 {
		t.Fatalf("found %d amd-smi fixtures: %v", len(files), err)
	}
	parsers := map[string]func([]byte) error{
		"topology":      func(b []byte) error { _, err := ParseTopology(bytes.NewReader(b)); return err },
		"topology-json": func(b []byte) error { _, err := ParseTopologyJSON(bytes.NewReader(b)); return err },
		"list-json":     func(b []byte) error { _, err := ParseListJSON(bytes.NewReader(b)); return err },
		"default":       func(b []byte) error { _, err := ParseDefault(bytes.NewReader(b)); return err },
		"process":       func(b []byte) error { _, err := ParseProcessJSON(bytes.NewReader(b)); return err },
		"memory":        func(b []byte) error { _, err := ParseMemUsageJSON(bytes.NewReader(b)); return err },
	}
	parsedBy := map[string]string{
		"amd-smi-default-mi355x-8gpu.txt":                            "default",
		"amd-smi-topology-a-t-json-2gpu-pcie.json":                   "topology-json",
		"amd-smi-topology-json-legacy-format-2gpu-pcie.json":         "topology-json",
		"amd-smi-topology-mi300x-8gpu-xgmi.txt":                      "topology",
		"amd-smi-topology-mi355x-8gpu-xgmi.txt":                      "topology",
		"amd-smi-default-mi300x-dpx-excerpt-3dev-rocm-amdsmi132.txt": "default",
		"amd-smi-default-mi300x-dpx-16dev-derived.txt":               "default",
		"amd-smi-default-mi300x-cpx-64dev-derived.txt":               "default",
	}
	for _, table := range []string{"access", "weight", "hops", "link-type", "numa-bw"} {
		parsedBy["amd-smi-topology-mi300x-8gpu-no-"+table+"-table-derived.txt"] = "topology"
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f)
		for name, p := range parsers {
			err := p(data)
			if parsedBy[base] == name {
				if err != nil {
					t.Errorf("%s with %s: %v", base, name, err)
				}
				continue
			}
			if err == nil {
				continue // a liberal parser may accept another format
			}
			var pe *topology.ParseError
			if !errors.As(err, &pe) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s with %s: error %v is not a one-line ParseError", base, name, err)
			}
		}
	}
}
