package nvidiasmi

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

var update = flag.Bool("update", false, "rewrite testdata/nvidia-smi/*.golden")

// machines are the hand-made fixtures in testdata/nvidia-smi.
var machines = []string{"hgx-h100-8gpu", "pcie-l40s-8gpu-2socket", "h200-2gpu-nv18"}

// fakeRunner replays a machine's fixtures keyed by the exact argv that
// Discover documents; fail maps an argv to the error it returns instead.
func fakeRunner(t *testing.T, machine string, fail map[string]error) (topology.Runner, *[]string) {
	files := map[string]string{
		"nvidia-smi topo -m":     "topo-m",
		"nvidia-smi nvlink -s":   "nvlink-s",
		"nvidia-smi topo -p2p r": "topo-p2p-r",
		"nvidia-smi --query-gpu=index,pci.bus_id,uuid,name,memory.total,memory.used,utilization.gpu,driver_version --format=csv,noheader,nounits": "query-gpu",
		"nvidia-smi --query-compute-apps=gpu_bus_id,pid,used_memory --format=csv,noheader,nounits":                                                "compute-apps",
	}
	var (
		mu    sync.Mutex
		calls []string
	)
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		argv := strings.Join(append([]string{name}, args...), " ")
		mu.Lock()
		calls = append(calls, argv)
		sort.Strings(calls) // Discover runs the calls concurrently: compare as a set
		mu.Unlock()
		if err, ok := fail[argv]; ok {
			return nil, err
		}
		what, ok := files[argv]
		if !ok {
			t.Errorf("unexpected command %q", argv)
			return nil, fmt.Errorf("unexpected command %q", argv)
		}
		return handmade(t, machine, what), nil
	}, &calls
}

func TestDiscoverGolden(t *testing.T) {
	for _, machine := range machines {
		t.Run(machine, func(t *testing.T) {
			run, _ := fakeRunner(t, machine, nil)
			var warns []string
			m, err := Discover(context.Background(), run, func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != 0 {
				t.Errorf("warnings: %q", warns)
			}
			var buf bytes.Buffer
			if err := topology.WriteJSON(&buf, m); err != nil {
				t.Fatal(err)
			}
			golden := testutil.Testdata(t, "nvidia-smi", machine+".golden")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := testutil.ReadFile(t, golden)
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("model differs from %s (go test -update rewrites it):\n%s", golden, buf.String())
			}
			back, err := topology.ReadJSON(bytes.NewReader(want))
			if err != nil {
				t.Fatalf("golden does not read back: %v", err)
			}
			if back.N() != m.N() {
				t.Errorf("golden has %d devices, model %d", back.N(), m.N())
			}
		})
	}
}

func TestDiscoverHGXH100(t *testing.T) {
	run, calls := fakeRunner(t, "hgx-h100-8gpu", nil)
	m, err := Discover(context.Background(), run, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []string{
		"nvidia-smi topo -m",
		"nvidia-smi --query-gpu=" + QueryGPUFields + " --format=csv,noheader,nounits",
		"nvidia-smi --query-compute-apps=" + ComputeAppsFields + " --format=csv,noheader,nounits",
		"nvidia-smi nvlink -s",
		"nvidia-smi topo -p2p r",
	}
	sort.Strings(wantCalls)
	if !reflect.DeepEqual(*calls, wantCalls) {
		t.Errorf("calls %q, want %q", *calls, wantCalls)
	}
	if m.Source != "nvidia-smi" || m.SourceVersion != "550.90.07" || m.Vendor != topology.VendorNVIDIA || m.N() != 8 {
		t.Fatalf("model source %q devices %d version %q vendor %q", m.Source, m.N(), m.SourceVersion, m.Vendor)
	}
	for a := 0; a < 8; a++ {
		for b := a + 1; b < 8; b++ {
			l := m.Link(a, b)
			if l.Type != topology.LinkNVLink || l.Count != 18 || !l.Direct || l.MaxBandwidth != 18*26562 || l.Assumed || l.Hops != 1 {
				t.Fatalf("link %d-%d = %+v", a, b, *l)
			}
		}
	}
	d := m.Devices[7]
	if d.PCIAddress != "0000:db:00.0" || d.Name != "NVIDIA H100 80GB HBM3" || d.MemTotalMiB != 81559 || d.NUMANode != 1 ||
		d.RuntimeIndex != 7 || !strings.HasPrefix(d.UniqueID, "GPU-") || d.Busy {
		t.Errorf("GPU7 = %+v", d)
	}
	if !reflect.DeepEqual(m.NUMANode(0).CPUs, cpus(t, "0-51,104-155")) || !reflect.DeepEqual(m.NUMANode(1).CPUs, cpus(t, "52-103,156-207")) {
		t.Errorf("NUMA nodes %v", m.NUMANodes)
	}
}

func TestDiscoverPCIe(t *testing.T) {
	run, _ := fakeRunner(t, "pcie-l40s-8gpu-2socket", nil)
	m, err := Discover(context.Background(), run, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantLink(t, m, 0, 1, topology.LinkPCIe, "PIX", 0, true, 1)
	wantLink(t, m, 0, 2, topology.LinkPCIe, "PXB", 0, true, 2)
	wantLink(t, m, 3, 4, topology.LinkPCIe, "SYS", 0, false, 4)
	// topo -p2p r: OK within a socket, CNS across: the SYS pair 3-4 has
	// no peer access and counts host-staged, below its SYS path.
	if p := m.Link(0, 1).P2P; p != topology.P2PAvailable {
		t.Errorf("0-1 P2P %v, want available (OK both ways)", p)
	}
	if p := m.Link(3, 4).P2P; p != topology.P2PUnavailable {
		t.Errorf("3-4 P2P %v, want unavailable (CNS)", p)
	}
	if m.BW(0, 1) != topology.DefaultHostBandwidth || m.BW(3, 4) != topology.HostStaged(topology.DefaultHostBandwidth/2, 0) || m.BW(3, 4) >= topology.DefaultHostBandwidth/2 {
		t.Errorf("BW(0,1) = %d, BW(3,4) = %d", m.BW(0, 1), m.BW(3, 4))
	}
	if got := numaOf(m); !reflect.DeepEqual(got, []int{0, 0, 0, 0, 1, 1, 1, 1}) {
		t.Errorf("NUMA %v", got)
	}
	if m.Devices[4].PCIAddress != "0000:9c:00.0" || m.Devices[4].Name != "NVIDIA L40S" || m.SourceVersion != "535.183.01" {
		t.Errorf("GPU4 = %+v, version %q", m.Devices[4], m.SourceVersion)
	}
}

func TestDiscoverH200Busy(t *testing.T) {
	run, _ := fakeRunner(t, "h200-2gpu-nv18", nil)
	m, err := Discover(context.Background(), run, nil)
	if err != nil {
		t.Fatal(err)
	}
	g0, g1 := m.Devices[0], m.Devices[1]
	if g0.Busy || g0.Processes != 0 {
		t.Errorf("GPU0 busy %v (%s), %d processes", g0.Busy, g0.BusyReason, g0.Processes)
	}
	if !g1.Busy || g1.Processes != 1 || g1.BusyReason != "1 process(es)" || g1.MemUsedMiB != 40960 || g1.UtilPercent != 97 {
		t.Errorf("GPU1 = %+v", g1)
	}
	if l := m.Link(0, 1); l.Level != "NV18" || l.MaxBandwidth != 478116 || l.MinBandwidth != 478116 || l.Assumed {
		t.Errorf("link 0-1 = %+v", *l)
	}
	if !reflect.DeepEqual(m.NUMANodes, []topology.NUMANode{{ID: 0, CPUs: cpus(t, "0-63")}}) {
		t.Errorf("NUMA nodes %v", m.NUMANodes)
	}
}

func TestDiscoverFailures(t *testing.T) {
	const qgpu = "nvidia-smi --query-gpu=" + QueryGPUFields + " --format=csv,noheader,nounits"
	toolErr := &topology.ToolError{Tool: "nvidia-smi", Args: []string{"nvlink", "-s"}, ExitCode: 3, Stderr: "NVLink not supported\n"}

	// nvlink -s failing only warns; NVLink bandwidth is then assumed.
	run, _ := fakeRunner(t, "h200-2gpu-nv18", map[string]error{"nvidia-smi nvlink -s": toolErr})
	var warns []string
	m, err := Discover(context.Background(), run, func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	if l := m.Link(0, 1); l.MaxBandwidth != 18*topology.NVLinkBandwidth || !l.Assumed {
		t.Errorf("link 0-1 = %+v, want assumed 18 links", *l)
	}
	if len(warns) != 1 || warns[0] != "nvidia-smi: nvlink -s failed, assuming NVLink bandwidths: nvidia-smi nvlink -s: exit status 3: NVLink not supported" {
		t.Errorf("warnings %q", warns)
	}

	// Other failures come back as the runner gave them.
	qErr := &topology.ToolError{Tool: "nvidia-smi", ExitCode: 9, Stderr: "NVIDIA-SMI has failed"}
	run, _ = fakeRunner(t, "h200-2gpu-nv18", map[string]error{qgpu: qErr})
	if _, err := Discover(context.Background(), run, nil); err != qErr {
		t.Errorf("query-gpu failure: err = %v, want the ToolError", err)
	}
	// Malformed output is the parser's ParseError.
	bad := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return public(t, "rocm-smi-showtopo-mi308x-8gpu.txt"), nil
	}
	var pe *topology.ParseError
	if _, err := Discover(context.Background(), bad, nil); !errors.As(err, &pe) || pe.Source != SourceTopo || !errors.Is(err, topology.ErrWrongTool) {
		t.Errorf("rocm-smi output: err = %v, want a topo -m ParseError wrapping ErrWrongTool", err)
	}
	notFound := fmt.Errorf("nvidia-smi: %w", topology.ErrToolNotFound)
	run, calls := fakeRunner(t, "h200-2gpu-nv18", map[string]error{"nvidia-smi topo -m": notFound})
	if _, err := Discover(context.Background(), run, nil); !errors.Is(err, topology.ErrToolNotFound) || len(*calls) != 5 {
		t.Errorf("missing tool: err = %v after %d calls", err, len(*calls))
	}
}

func TestBuild(t *testing.T) {
	topo := &Topo{
		GPUs:  []TopoGPU{{CPUAffinity: []int{0, 1}, NUMAAffinity: -1, GPUNUMAID: 4}, {NUMAAffinity: 2, GPUNUMAID: 5}, {NUMAAffinity: -1, GPUNUMAID: -1}},
		Cells: [][]string{{"X", "NV2", "SOC"}, {"NV2", "X", "PHB"}, {"SOC", "PHB", "X"}},
	}
	nvl := &NVLinkStatus{GPUs: []NVLinkGPU{
		{Index: 0, Links: []NVLink{{25781}, {25781}}},
		{Index: 1, Links: []NVLink{{20000}, {0}}},
	}}
	gpus := []GPU{{Index: 0, PCIAddress: "0000:18:00.0"}, {Index: 1, PCIAddress: "0000:19:00.0"}, {Index: 5, PCIAddress: "0000:20:00.0"}}
	apps := []ComputeApp{{"0000:19:00.0", 10}, {"0000:19:00.0", 11}, {"0000:99:00.0", 12}}
	var warns []string
	m, err := Build(topo, nvl, gpus, apps, func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	if got := numaOf(m); !reflect.DeepEqual(got, []int{4, 2, -1}) {
		t.Errorf("NUMA %v, want [4 2 -1] (NUMA Affinity, else GPU NUMA ID)", got)
	}
	if l := m.Link(0, 1); l.MaxBandwidth != 40000 || l.Count != 2 {
		t.Errorf("link 0-1 = %+v, want 2 x the slower GPU's 20000 MB/s", *l)
	}
	if l := m.Link(0, 2); l.Level != "SYS" || l.Hops != 4 || l.Direct {
		t.Errorf("SOC link = %+v, want SYS, 4 hops, not direct", *l)
	}
	if m.Devices[1].Processes != 2 || !m.Devices[1].Busy {
		t.Errorf("GPU1 = %+v", m.Devices[1])
	}
	wantWarns := []string{
		"nvidia-smi: --query-gpu lists GPU 5, topo -m only GPU0-GPU2",
		"nvidia-smi: GPU2 of topo -m is missing from --query-gpu",
		"nvidia-smi: process 12 runs on 0000:99:00.0, which is not a known GPU",
	}
	if !reflect.DeepEqual(warns, wantWarns) {
		t.Errorf("warnings %q\nwant %q", warns, wantWarns)
	}

}

// replace answers argv with out and every other call as run does.
func replace(run topology.Runner, argv string, out []byte) topology.Runner {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if strings.Join(append([]string{name}, args...), " ") == argv {
			return out, nil
		}
		return run(ctx, name, args...)
	}
}

// On PCIe-only GPUs `nvidia-smi nvlink -s` says all links are inactive:
// that means no NVLink, not malformed output, and is no warning.
func TestDiscoverNVLinkInactive(t *testing.T) {
	run, _ := fakeRunner(t, "pcie-l40s-8gpu-2socket", nil)
	run = replace(run, "nvidia-smi nvlink -s", []byte("NVML: Unable to retrieve NVLink information as all links are inActive\n"))
	var warns []string
	m, err := Discover(context.Background(), run, func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
	if err != nil || len(warns) != 0 {
		t.Fatalf("err %v, warnings %q", err, warns)
	}
	if m.N() != 8 {
		t.Errorf("%d devices", m.N())
	}
	st, err := ParseNVLinkStatus(strings.NewReader("\nNVML: Unable to retrieve NVLink information as all links are inActive\n"))
	if err != nil || len(st.GPUs) != 0 {
		t.Errorf("ParseNVLinkStatus: %+v, %v", st, err)
	}
}

// topo -m and --query-gpu must list as many GPUs: one cut short is
// refused with one line naming both calls.
func TestDiscoverCallsAgree(t *testing.T) {
	const qgpu = "nvidia-smi --query-gpu=" + QueryGPUFields + " --format=csv,noheader,nounits"
	full := handmade(t, "pcie-l40s-8gpu-2socket", "query-gpu")
	lines := strings.SplitAfter(string(full), "\n")
	run, _ := fakeRunner(t, "pcie-l40s-8gpu-2socket", nil)
	run = replace(run, qgpu, []byte(strings.Join(lines[:7], "")))
	_, err := Discover(context.Background(), run, nil)
	want := "nvidia-smi: inconsistent input: `nvidia-smi topo -m` lists 8 GPUs but `nvidia-smi --query-gpu` 7"
	if err == nil || err.Error() != want || !errors.Is(err, topology.ErrInconsistent) {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// TestDiscoverP2PFailures: a failing or unreadable `topo -p2p r` only
// warns, and the model is the one Build makes, peer access unknown.
func TestDiscoverP2PFailures(t *testing.T) {
	p2pErr := &topology.ToolError{Tool: "nvidia-smi", Args: []string{"topo", "-p2p", "r"}, ExitCode: 2, Stderr: "Invalid combination of input arguments.\n"}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) topology.Runner
		warn string
	}{
		{"tool fails", func(t *testing.T) topology.Runner {
			run, _ := fakeRunner(t, "pcie-l40s-8gpu-2socket", map[string]error{"nvidia-smi topo -p2p r": p2pErr})
			return run
		}, "nvidia-smi: topo -p2p r failed, peer-to-peer access unknown: nvidia-smi topo -p2p r: exit status 2: Invalid combination of input arguments."},
		{"topo -m output", func(t *testing.T) topology.Runner {
			run, _ := fakeRunner(t, "pcie-l40s-8gpu-2socket", nil)
			return replace(run, "nvidia-smi topo -p2p r", handmade(t, "pcie-l40s-8gpu-2socket", "topo-m"))
		}, "nvidia-smi: peer-to-peer access unknown: nvidia-smi topo -p2p: line 2, column 10: not this tool's output: this is `nvidia-smi topo -m` output, not `topo -p2p`: GPU0/GPU1 cell \"PIX\""},
		{"another machine's matrix", func(t *testing.T) topology.Runner {
			run, _ := fakeRunner(t, "pcie-l40s-8gpu-2socket", nil)
			return replace(run, "nvidia-smi topo -p2p r", public(t, "nvidia-smi-topo-p2p-r-l4-2gpu-cns.txt"))
		}, "nvidia-smi: peer-to-peer access unknown: nvidia-smi topo -p2p: inconsistent input: 2 GPUs, `nvidia-smi topo -m` 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warns []string
			m, err := Discover(context.Background(), tc.run(t), func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != 1 || warns[0] != tc.warn {
				t.Errorf("warnings %q, want [%q]", warns, tc.warn)
			}
			for _, l := range m.Links {
				if l.P2P != topology.P2PUnknown {
					t.Fatalf("link %d-%d P2P %v, want unknown", l.A, l.B, l.P2P)
				}
			}
		})
	}
}

// TestMarkP2P: a refusal either way marks the pair unavailable, OK both
// ways available, U (or OK one way and U the other) leaves it unknown.
func TestMarkP2P(t *testing.T) {
	topo, err := ParseTopo(bytes.NewReader(handmade(t, "pcie-l40s-8gpu-2socket", "topo-m")))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(topo, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A 3-GPU corner of the 8: GPU0-1 GNS one way only, 0-2 U, 1-2 OK;
	// the other GPUs are OK, with TNS and NS between 5 and 6, 6 and 7.
	cells := map[[2]int]string{{0, 1}: "GNS", {1, 0}: "OK", {0, 2}: "U", {2, 0}: "OK", {5, 6}: "TNS", {6, 5}: "TNS", {7, 6}: "NS", {6, 7}: "OK"}
	p := &P2P{Status: make([][]string, 8)}
	for i := range p.Status {
		p.Status[i] = make([]string, 8)
		for j := range p.Status[i] {
			switch c, ok := cells[[2]int{i, j}]; {
			case i == j:
				p.Status[i][j] = "X"
			case ok:
				p.Status[i][j] = c
			default:
				p.Status[i][j] = "OK"
			}
		}
	}
	if err := markP2P(m, p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b int
		want topology.P2P
	}{{0, 1, topology.P2PUnavailable}, {0, 2, topology.P2PUnknown}, {1, 2, topology.P2PAvailable}, {5, 6, topology.P2PUnavailable}, {6, 7, topology.P2PUnavailable}, {3, 4, topology.P2PAvailable}} {
		if got := m.Link(tc.a, tc.b).P2P; got != tc.want {
			t.Errorf("%d-%d P2P %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}
