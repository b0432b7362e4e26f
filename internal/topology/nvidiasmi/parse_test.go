package nvidiasmi

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// handmade returns a fixture of ours from testdata/nvidia-smi.
func handmade(t testing.TB, machine, what string) []byte {
	t.Helper()
	return testutil.ReadFile(t, testutil.Testdata(t, "nvidia-smi", machine+"."+what+".txt"))
}

func TestParseNVLinkStatus(t *testing.T) {
	st, err := ParseNVLinkStatus(bytes.NewReader(handmade(t, "h200-2gpu-nv18", "nvlink-s")))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GPUs) != 2 {
		t.Fatalf("%d GPUs, want 2", len(st.GPUs))
	}
	g := st.GPU(1)
	if g == nil || len(g.Links) != 18 {
		t.Fatalf("GPU 1 = %+v", g)
	}
	if g.Links[17] != (NVLink{SpeedMBps: 26562}) || g.LinkSpeed() != 26562 {
		t.Errorf("link 17 = %+v, speed %d", g.Links[17], g.LinkSpeed())
	}

	in := "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-1a2b)\n\t Link 0: 25.781 GB/s\n\t Link 1: <inactive>\n\t Link 2: 20000 MB/s\r\n\nGPU 3: NVIDIA A10\n"
	st, err = ParseNVLinkStatus(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := &NVLinkStatus{GPUs: []NVLinkGPU{
		{Index: 0, Links: []NVLink{{25781}, {0}, {20000}}},
		{Index: 3},
	}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("got  %+v\nwant %+v", st, want)
	}
	if st.GPU(0).LinkSpeed() != 20000 || st.GPU(3).LinkSpeed() != 0 || st.GPU(1) != nil {
		t.Errorf("LinkSpeed/GPU lookups wrong")
	}
	if st, err := ParseNVLinkStatus(strings.NewReader("")); err != nil || len(st.GPUs) != 0 {
		t.Errorf("empty input: %v, %v", st, err)
	}
}

func TestParseNVLinkStatusErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *topology.ParseError
		msg  string
	}{
		{"link before GPU", "\t Link 0: 26.562 GB/s\n", &topology.ParseError{Source: SourceNVLink, Line: 1, Column: 2, Err: topology.ErrSyntax},
			"nvidia-smi nvlink -s: line 1, column 3: malformed input: link line before any GPU line"},
		{"bad speed", "GPU 0: NVIDIA H200 (UUID: GPU-1)\n\t Link 0: fast\n", &topology.ParseError{Source: SourceNVLink, Line: 2, Column: 10, Err: topology.ErrBadNumber},
			`nvidia-smi nvlink -s: line 2, column 11: not a number: GPU 0 link 0 speed "fast"`},
		{"infinite speed", "GPU 0: X\n\t Link 0: 1e400 GB/s\n", &topology.ParseError{Source: SourceNVLink, Line: 2, Column: 10, Err: topology.ErrBadNumber},
			`nvidia-smi nvlink -s: line 2, column 11: not a number: GPU 0 link 0 speed "1e400 GB/s"`},
		{"other tool", "GPU[0]\t\t: (Topology) Numa Node: 0\n", &topology.ParseError{Source: SourceNVLink, Line: 1, Column: 0, Err: topology.ErrSyntax},
			`nvidia-smi nvlink -s: line 1: malformed input: unexpected line "GPU[0]\t\t: (Topology) Numa Node: 0"`},
		{"link twice", "GPU 0: X\n\t Link 0: <inactive>\n\t Link 0: <inactive>\n", &topology.ParseError{Source: SourceNVLink, Line: 3, Column: 2, Err: topology.ErrSyntax},
			"nvidia-smi nvlink -s: line 3, column 3: malformed input: GPU 0 link 0 listed twice"},
		{"GPU twice", "GPU 0: X\nGPU 0: X\n", &topology.ParseError{Source: SourceNVLink, Line: 2, Column: 0, Err: topology.ErrSyntax},
			"nvidia-smi nvlink -s: line 2: malformed input: GPU 0 listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := ParseNVLinkStatus(strings.NewReader(tt.in))
			checkParseError(t, st, err, tt.want, tt.msg)
		})
	}
}

func TestParseQueryGPU(t *testing.T) {
	gpus, err := ParseQueryGPU(bytes.NewReader(handmade(t, "hgx-h100-8gpu", "query-gpu")))
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 8 {
		t.Fatalf("%d GPUs, want 8", len(gpus))
	}
	g := gpus[3]
	if g.Index != 3 || g.PCIAddress != "0000:5d:00.0" || g.Name != "NVIDIA H100 80GB HBM3" || g.MemTotalMiB != 81559 ||
		g.MemUsedMiB != 0 || g.DriverVersion != "550.90.07" || !strings.HasPrefix(g.UUID, "GPU-") {
		t.Errorf("GPU 3 = %+v", g)
	}

	in := "index, pci.bus_id, uuid, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%]\n" +
		"0, 00000000:3B:00.0, GPU-aa, Tesla T4, 15360 MiB, 0 MiB, 12 %\r\n" +
		"1, [N/A], [N/A], [Not Supported], [N/A], [Insufficient Permissions], [Not Supported]\n"
	gpus, err = ParseQueryGPU(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{
		{Index: 0, PCIAddress: "0000:3b:00.0", UUID: "GPU-aa", Name: "Tesla T4", MemTotalMiB: 15360, UtilPercent: 12},
		{Index: 1},
	}
	if !reflect.DeepEqual(gpus, want) {
		t.Errorf("got  %+v\nwant %+v", gpus, want)
	}
}

func TestParseQueryGPUErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *topology.ParseError
		msg  string
	}{
		{"empty", "", &topology.ParseError{Source: SourceQueryGPU, Err: topology.ErrNoDevices},
			"nvidia-smi --query-gpu: no GPU devices found"},
		{"no devices", "No devices were found\n", &topology.ParseError{Source: SourceQueryGPU, Line: 1, Err: topology.ErrNoDevices},
			"nvidia-smi --query-gpu: line 1: no GPU devices found: No devices were found"},
		{"too few fields", "0, 00000000:18:00.0, GPU-1\n", &topology.ParseError{Source: SourceQueryGPU, Line: 1, Err: topology.ErrSyntax},
			"nvidia-smi --query-gpu: line 1: malformed input: 3 fields, want 8 (" + QueryGPUFields + ")"},
		{"bad index", "x, 00000000:18:00.0, GPU-1, H100, 1, 0, 0, 550\n", &topology.ParseError{Source: SourceQueryGPU, Line: 1, Err: topology.ErrBadNumber},
			`nvidia-smi --query-gpu: line 1: not a number: index "x"`},
		{"bad bus id", "0, 18:00, GPU-1, H100, 1, 0, 0, 550\n", &topology.ParseError{Source: SourceQueryGPU, Line: 1, Column: 3, Err: topology.ErrSyntax},
			`nvidia-smi --query-gpu: line 1, column 4: malformed input: pci.bus_id "18:00"`},
		{"bad memory", "0, 00000000:18:00.0, GPU-1, H100, lots, 0, 0, 550\n", &topology.ParseError{Source: SourceQueryGPU, Line: 1, Column: 34, Err: topology.ErrBadNumber},
			`nvidia-smi --query-gpu: line 1, column 35: not a number: memory.total "lots"`},
		{"utilisation over 100", "0, 00000000:18:00.0, GPU-1, H100, 1, 0, 101, 550\n", &topology.ParseError{Source: SourceQueryGPU, Line: 1, Column: 40, Err: topology.ErrBadNumber},
			`nvidia-smi --query-gpu: line 1, column 41: not a number: utilization.gpu "101"`},
		{"index twice", "0, [N/A], GPU-1, H100, 1, 0, 0, 550\n0, [N/A], GPU-2, H100, 1, 0, 0, 550\n", &topology.ParseError{Source: SourceQueryGPU, Line: 2, Err: topology.ErrSyntax},
			"nvidia-smi --query-gpu: line 2: malformed input: GPU index 0 listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gpus, err := ParseQueryGPU(strings.NewReader(tt.in))
			checkParseError(t, gpus, err, tt.want, tt.msg)
		})
	}
}

func TestParseComputeApps(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ComputeApp
	}{
		{"empty", "", nil},
		{"no processes", "No running processes found\n", nil},
		{"h200 busy GPU", string(handmade(t, "h200-2gpu-nv18", "compute-apps")), []ComputeApp{{"0000:52:00.0", 41237}}},
		{"header, N/A memory", "gpu_bus_id, pid, used_gpu_memory [MiB]\n00000000:1B:00.0, 7, [N/A]\n00000000:1B:00.0, 8, 100 MiB\n",
			[]ComputeApp{{"0000:1b:00.0", 7}, {"0000:1b:00.0", 8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseComputeApps(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	errs := []struct {
		name string
		in   string
		want *topology.ParseError
		msg  string
	}{
		{"two fields", "00000000:1B:00.0, 7\n", &topology.ParseError{Source: SourceComputeApps, Line: 1, Err: topology.ErrSyntax},
			"nvidia-smi --query-compute-apps: line 1: malformed input: 2 fields, want 3 (" + ComputeAppsFields + ")"},
		{"bad pid", "00000000:1B:00.0, -7, 1\n", &topology.ParseError{Source: SourceComputeApps, Line: 1, Column: 18, Err: topology.ErrBadNumber},
			`nvidia-smi --query-compute-apps: line 1, column 19: not a number: pid "-7"`},
		{"bad bus id", "\n00000000:1G:00.0, 7, 1\n", &topology.ParseError{Source: SourceComputeApps, Line: 2, Err: topology.ErrSyntax},
			`nvidia-smi --query-compute-apps: line 2: malformed input: gpu_bus_id "00000000:1G:00.0"`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			apps, err := ParseComputeApps(strings.NewReader(tt.in))
			checkParseError(t, apps, err, tt.want, tt.msg)
		})
	}
}
