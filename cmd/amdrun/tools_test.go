package main_test

// End-to-end tests of discovery through vendor tools: the real amdrun
// binary runs testdata/fake/fake-tool linked as rocm-smi, amd-smi and
// nvidia-smi first on PATH, replaying saved captures keyed by the exact
// argv each source's Discover passes; and the KFD sysfs trees of
// testdata/kfd (unpacked by testutil.KFD) read in place with --sysfs-root.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/nvidiasmi"
	"github.com/amdrun/amdrun/internal/topology/rocmsmi"
)

// vendorTools are the programs the fake stands in for; the first three
// are topology sources (--source NAME).
var vendorTools = []string{"rocm-smi", "amd-smi", "nvidia-smi", "rocm_bandwidth_test"}

// The argv each source's Discover runs (see internal/topology/*/Discover).
var (
	nvTopoArgs     = []string{"topo", "-m"}
	nvNVLinkArgs   = []string{"nvlink", "-s"}
	nvQueryArgs    = []string{"--query-gpu=" + nvidiasmi.QueryGPUFields, "--format=csv,noheader,nounits"}
	nvAppsArgs     = []string{"--query-compute-apps=" + nvidiasmi.ComputeAppsFields, "--format=csv,noheader,nounits"}
	nvP2PArgs      = []string{"topo", "-p2p", "r"}
	amdTopoArgs    = []string{"topology"}
	amdDefaultArgs = []string{}
	amdListArgs    = []string{"list", "--json"}
	amdProcArgs    = []string{"process", "--json"}
	amdMemArgs     = []string{"metric", "--mem-usage", "--json"}
)

// fakeNode is a PATH with fake vendor tools first and the directory
// their replies are read from.
type fakeNode struct {
	t   *testing.T
	bin string // PATH entry holding the fake tools
	dir string // AMDRUN_FAKE_DIR
	env []string
}

// newFakeNode links fake-tool as every vendor tool into a fresh bin
// directory put first on a PATH that keeps the test's own directories
// (python3, sh) but none holding a real vendor tool. No tool has a reply
// yet: each exits 2 until serve gives it one.
func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	tmp := t.TempDir()
	n := &fakeNode{t: t, bin: filepath.Join(tmp, "bin"), dir: filepath.Join(tmp, "fake")}
	fake := testutil.Testdata(t, "fake", "fake-tool")
	if err := os.MkdirAll(n.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range vendorTools {
		if err := os.Symlink(fake, filepath.Join(n.bin, tool)); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(n.dir, tool), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.env = toolEnv(t, n.bin+string(os.PathListSeparator)+systemPath(), "AMDRUN_FAKE_DIR="+n.dir)
	return n
}

// systemPath is the test's PATH without directories holding a real
// vendor tool.
func systemPath() string {
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		real := false
		for _, tool := range vendorTools {
			if _, err := os.Stat(filepath.Join(d, tool)); err == nil {
				real = true
			}
		}
		if !real && d != "" {
			keep = append(keep, d)
		}
	}
	if len(keep) == 0 {
		keep = []string{"/usr/bin", "/bin"}
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// toolEnv is cleanEnv with PATH replaced, OMP_NUM_THREADS set (so the
// only stderr lines are the ones under test) and a private bench cache
// (so no measured bandwidth replaces the sources' figures).
func toolEnv(t *testing.T, path string, extra ...string) []string {
	t.Helper()
	env := setEnv(cleanEnv(t), "PATH", path)
	env = setEnv(env, "OMP_NUM_THREADS", "1")
	env = setEnv(env, "XDG_CACHE_HOME", t.TempDir())
	return append(env, extra...)
}

// setEnv returns env with key set to val (replacing every earlier value).
func setEnv(env []string, key, val string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+val)
}

// fakeKey is the reply file name fake-tool looks up for args.
func fakeKey(args []string) string {
	k := strings.NewReplacer(" ", "_", "/", "_", "=", "_", ",", "_").Replace(strings.Join(args, " "))
	if k == "" {
		k = "_"
	}
	return k + ".txt"
}

// serve makes tool print the file src when run with exactly args.
func (n *fakeNode) serve(tool, src string, args ...string) {
	n.t.Helper()
	if _, err := os.Stat(src); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Symlink(src, filepath.Join(n.dir, tool, fakeKey(args))); err != nil {
		n.t.Fatal(err)
	}
}

// serveText makes tool print text when run with exactly args.
func (n *fakeNode) serveText(tool, text string, args ...string) {
	n.t.Helper()
	if err := os.WriteFile(filepath.Join(n.dir, tool, fakeKey(args)), []byte(text), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// serveNvidia serves the nvidia-smi captures testdata/nvidia-smi/<machine>.*:
// four always, and topo -p2p r where the machine has one (without it the
// fake exits 2 and Discover warns that peer access is unknown).
func (n *fakeNode) serveNvidia(machine string) {
	n.t.Helper()
	src := func(what string) string { return testutil.Testdata(n.t, "nvidia-smi", machine+"."+what+".txt") }
	n.serve("nvidia-smi", src("topo-m"), nvTopoArgs...)
	n.serve("nvidia-smi", src("nvlink-s"), nvNVLinkArgs...)
	n.serve("nvidia-smi", src("query-gpu"), nvQueryArgs...)
	n.serve("nvidia-smi", src("compute-apps"), nvAppsArgs...)
	if p := src("topo-p2p-r"); fileExists(p) {
		n.serve("nvidia-smi", p, nvP2PArgs...)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// serveAmdSmiMI300X serves the hand-made MI300X SPX amd-smi captures.
func (n *fakeNode) serveAmdSmiMI300X() {
	n.t.Helper()
	src := func(what string) string { return testutil.Testdata(n.t, "amd-smi", "mi300x-8gpu-spx-"+what) }
	n.serve("amd-smi", src("topology.txt"), amdTopoArgs...)
	n.serve("amd-smi", src("default.txt"), amdDefaultArgs...)
	n.serve("amd-smi", src("list.json"), amdListArgs...)
	n.serve("amd-smi", src("process.json"), amdProcArgs...)
	n.serve("amd-smi", src("metric-mem-usage.json"), amdMemArgs...)
}

// serveRocmSmiSeed serves the seed MI250 capture for the topology run
// and the bare (concise table) run; the identity run and --version fail.
func (n *fakeNode) serveRocmSmiSeed() {
	n.t.Helper()
	// The seed document's copy stops before rocm-smi's closing banner;
	// amdrun refuses output without it (cut short), so the fake prints it.
	seed := string(testutil.ReadFile(n.t, testutil.Testdata(n.t, "rocm-smi", "mi250-seed-collapsed.txt"))) +
		"=========================== End of ROCm SMI Log ============================\n"
	n.serveText("rocm-smi", seed, rocmsmi.TopoArgs...)
	n.serveText("rocm-smi", seed, rocmsmi.ConciseArgs...)
}

// topoJSON runs `amdrun topo --json ARGS...` and decodes the model.
func topoJSON(t *testing.T, env []string, args ...string) (*topology.Model, result) {
	t.Helper()
	r := runAmdrun(t, env, append([]string{"topo", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("amdrun topo --json %v: exit %d\n%s", args, r.code, r.stderr)
	}
	var m topology.Model
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("topo JSON: %v\n%s", err, r.stdout)
	}
	return &m, r
}

// link finds the link a-b of a decoded model.
func link(t *testing.T, m *topology.Model, a, b int) topology.Link {
	t.Helper()
	if a > b {
		a, b = b, a
	}
	for _, l := range m.Links {
		if l.A == a && l.B == b {
			return l
		}
	}
	t.Fatalf("no link %d-%d among %d links", a, b, len(m.Links))
	return topology.Link{}
}

// oneErrorLine checks stderr is one "amdrun: " line after any warning
// lines, and returns it.
func oneErrorLine(t *testing.T, r result) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	var errs []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "amdrun: warning: ") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "amdrun: ") || errs[0] != lines[len(lines)-1] {
		t.Fatalf("want one error line starting \"amdrun: \" (after warnings), got:\n%s", r.stderr)
	}
	return errs[0]
}

// devState maps device index to the STATE column of `amdrun ps` (non-TTY).
func devState(t *testing.T, r result) map[int]string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("amdrun ps: exit %d\n%s", r.code, r.stderr)
	}
	st := map[int]string{}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if lines[0] != "GPU\tKEY\tNUMA\tSTATE\tDETAIL" {
		t.Fatalf("ps header %q: want GPU KEY NUMA STATE DETAIL, tab-separated", lines[0])
	}
	for _, line := range lines[1:] {
		f := strings.Split(line, "\t")
		var dev int
		if len(f) != 5 {
			t.Fatalf("ps line %q: want GPU KEY NUMA STATE DETAIL", line)
		}
		if _, err := fmt.Sscan(f[0], &dev); err != nil {
			t.Fatalf("ps line %q: %v", line, err)
		}
		st[dev] = f[3]
	}
	return st
}

func TestNvidiaSmiRealH200Capture(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serveNvidia("h200x2-real")

	m, _ := topoJSON(t, n.env, "--source", "nvidia-smi")
	if m.Source != "nvidia-smi" || len(m.Devices) != 2 {
		t.Fatalf("source %q, %d devices; want nvidia-smi, 2", m.Source, len(m.Devices))
	}
	for i, pci := range []string{"0000:00:06.0", "0000:00:07.0"} {
		d := m.Devices[i]
		if d.Name != "NVIDIA H200" || d.PCIAddress != pci || d.Busy || d.MemTotalMiB != 143771 {
			t.Errorf("device %d: %q at %q busy=%v %d MiB; want an idle NVIDIA H200 at %s, 143771 MiB", i, d.Name, d.PCIAddress, d.Busy, d.MemTotalMiB, pci)
		}
	}
	l := link(t, m, 0, 1)
	if l.Type != topology.LinkNVLink || l.Level != "NV18" || l.MaxBandwidth != 478116 || !l.Direct {
		t.Errorf("link 0-1: %+v; want nvlink NV18, 478116 MB/s (18 x 26.562 GB/s), direct", l)
	}

	p := dryRun(t, n.env, "--source", "nvidia-smi", "--ngpus", "1", "x.py")
	if p.VisibleDevices != "0" || len(p.Ranks) != 1 {
		t.Fatalf("--ngpus 1 chose %q with %d ranks; want device 0", p.VisibleDevices, len(p.Ranks))
	}
	if got := p.Ranks[0].Env["CUDA_DEVICE_ORDER"]; got != "PCI_BUS_ID" {
		t.Errorf("rank 0 CUDA_DEVICE_ORDER=%q; want PCI_BUS_ID (nvidia-smi numbers GPUs by PCI bus)", got)
	}
	if got := p.Ranks[0].Env["CUDA_VISIBLE_DEVICES"]; got != "0" {
		t.Errorf("rank 0 CUDA_VISIBLE_DEVICES=%q; want 0", got)
	}

	// auto: no KFD under the empty root, amd-smi and rocm-smi refuse
	// (exit 2), nvidia-smi answers.
	m, _ = topoJSON(t, n.env, "--source", "auto", "--sysfs-root", t.TempDir())
	if m.Source != "nvidia-smi" || len(m.Devices) != 2 {
		t.Errorf("--source auto: source %q, %d devices; want nvidia-smi's 2", m.Source, len(m.Devices))
	}
}

// TestNvidiaSmiP2PRefusedPairAvoided: `nvidia-smi topo -p2p r` refusing
// peer access between the PIX pair 0-1 (NS) makes amdrun topo mark it
// noP2P ("p2p": false) and selection take the other PIX pair on the
// socket; with every pair OK it takes 0-1, the lowest indices.
func TestNvidiaSmiP2PRefusedPairAvoided(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serveNvidia("pcie-l40s-8gpu-2socket")
	if p := dryRun(t, n.env, "--source", "nvidia-smi", "--ngpus", "2", "x.py"); p.VisibleDevices != "0,1" {
		t.Fatalf("every pair OK: --ngpus 2 chose %q, want 0,1", p.VisibleDevices)
	}

	n = newFakeNode(t)
	n.serveNvidia("pcie-l40s-8gpu-2socket")
	p2p := string(testutil.ReadFile(t, testutil.Testdata(t, "nvidia-smi", "pcie-l40s-8gpu-2socket.topo-p2p-r.txt")))
	p2p = strings.Replace(p2p, " GPU0\tX\tOK\t", " GPU0\tX\tNS\t", 1)
	p2p = strings.Replace(p2p, " GPU1\tOK\tX\t", " GPU1\tNS\tX\t", 1)
	if err := os.Remove(filepath.Join(n.dir, "nvidia-smi", fakeKey(nvP2PArgs))); err != nil {
		t.Fatal(err)
	}
	n.serveText("nvidia-smi", p2p, nvP2PArgs...)

	m, r := topoJSON(t, n.env, "--source", "nvidia-smi")
	if strings.Contains(r.stderr, "peer") {
		t.Errorf("a p2p matrix that reads should not warn: %s", r.stderr)
	}
	if l := link(t, m, 0, 1); l.P2P != topology.P2PUnavailable || l.Level != "PIX" {
		t.Errorf("link 0-1 %s p2p %v; want PIX, unavailable", l.Level, l.P2P)
	}
	if l := link(t, m, 2, 3); l.P2P != topology.P2PAvailable {
		t.Errorf("link 2-3 p2p %v; want available", l.P2P)
	}
	if l := link(t, m, 3, 4); l.P2P != topology.P2PUnavailable || l.Level != "SYS" {
		t.Errorf("link 3-4 %s p2p %v; want SYS, unavailable (CNS across the sockets)", l.Level, l.P2P)
	}
	text := runAmdrun(t, n.env, "topo", "--source", "nvidia-smi")
	if text.code != 0 || !strings.Contains(text.stdout, "\tPIX 32* noP2P\t") || strings.Count(text.stdout, "PIX 32* noP2P") != 2 {
		t.Errorf("amdrun topo should mark the pairs without peer access:\n%s%s", text.stdout, text.stderr)
	}
	if p := dryRun(t, n.env, "--source", "nvidia-smi", "--ngpus", "2", "x.py"); p.VisibleDevices != "2,3" {
		t.Errorf("0-1 without peer access: --ngpus 2 chose %q, want 2,3", p.VisibleDevices)
	}
}

func TestNvidiaSmiBusyGPULeftOut(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serveNvidia("h200-2gpu-nv18") // GPU 1 runs pid 41237

	p := dryRun(t, n.env, "--source", "nvidia-smi", "--ngpus", "1", "x.py")
	if !slices.Equal(p.Devices, []int{0}) {
		t.Errorf("--ngpus 1 chose %v; want [0] (GPU 1 has a compute app)", p.Devices)
	}

	r := runAmdrun(t, n.env, "--source", "nvidia-smi", "--ngpus", "2", "--dry-run", "x.py")
	if r.code != 1 {
		t.Fatalf("--ngpus 2 with GPU 1 busy: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	// oneErrorLine: warnings may come first (the capture's CPU lists, of a
	// 64-CPU host, are outside this machine's possible CPUs: issue 24).
	if line := oneErrorLine(t, r); !strings.Contains(line, "busy: 1") || !strings.Contains(line, "--allow-busy") {
		t.Errorf("error %q should name device 1 as busy and point at --allow-busy", line)
	}

	p = dryRun(t, n.env, "--source", "nvidia-smi", "--ngpus", "2", "--allow-busy", "x.py")
	if !slices.Equal(p.Devices, []int{0, 1}) {
		t.Errorf("--allow-busy --ngpus 2 chose %v; want [0 1]", p.Devices)
	}

	st := devState(t, runAmdrun(t, n.env, "ps", "--source", "nvidia-smi"))
	if st[0] != "free" || st[1] != "busy" || len(st) != 2 {
		t.Errorf("amdrun ps states %v; want 0 free, 1 busy", st)
	}
}

func TestRocmSmiSeedMI250MatchesExample(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serveRocmSmiSeed()
	n.serveNvidia("h200x2-real") // present, but auto must stop at rocm-smi

	m, r := topoJSON(t, n.env, "--source", "rocm-smi")
	if m.Source != "rocm-smi" || len(m.Devices) != 8 {
		t.Fatalf("source %q, %d devices; want rocm-smi, 8", m.Source, len(m.Devices))
	}
	// The identity run has no reply: a warning, not a failure.
	if !strings.Contains(r.stderr, "amdrun: warning: rocm-smi") {
		t.Errorf("the failing identity run should warn; stderr:\n%s", r.stderr)
	}
	for _, tc := range []struct {
		a, b   int
		max    int64
		direct bool
	}{{0, 1, 200000, true}, {0, 6, 100000, true}, {0, 2, 50000, true}, {0, 3, 0, false}, {4, 5, 200000, true}, {3, 7, 50000, true}} {
		l := link(t, m, tc.a, tc.b)
		if l.Direct != tc.direct || (tc.direct && l.MaxBandwidth != tc.max) {
			t.Errorf("link %d-%d: max %d MB/s direct %v; want %d direct %v", tc.a, tc.b, l.MaxBandwidth, l.Direct, tc.max, tc.direct)
		}
	}
	for i, d := range m.Devices {
		if want := i / 4; d.NUMANode != want {
			t.Errorf("GPU %d on NUMA node %d, want %d", i, d.NUMANode, want)
		}
	}
	if m.Devices[0].Package == "" || m.Devices[0].Package != m.Devices[1].Package || m.Devices[1].Package == m.Devices[2].Package {
		t.Errorf("packages %q %q %q: GPUs 0 and 1 are the two dies of one MI250", m.Devices[0].Package, m.Devices[1].Package, m.Devices[2].Package)
	}

	// The same machine from the bundled example: the same devices and
	// links. (CPUs are the host's, attached to discovered models only.)
	ex, _ := topoJSON(t, n.env, "--source", "example")
	strip := func(ds []topology.Device) []topology.Device {
		out := slices.Clone(ds)
		for i := range out {
			out[i].CPUs = nil
		}
		return out
	}
	got, _ := json.Marshal(strip(m.Devices))
	want, _ := json.Marshal(strip(ex.Devices))
	if string(got) != string(want) {
		t.Errorf("devices differ between rocm-smi and example:\nrocm-smi: %s\nexample:  %s", got, want)
	}
	got, _ = json.Marshal(m.Links)
	want, _ = json.Marshal(ex.Links)
	if string(got) != string(want) {
		t.Errorf("links differ between rocm-smi and example:\nrocm-smi: %s\nexample:  %s", got, want)
	}

	if p := dryRun(t, n.env, "--source", "rocm-smi", "--ngpus", "3", "x.py"); p.VisibleDevices != "0,1,6" {
		t.Errorf("--ngpus 3 chose %q; want 0,1,6 as on the example", p.VisibleDevices)
	}

	m, _ = topoJSON(t, n.env, "--source", "auto", "--sysfs-root", t.TempDir())
	if m.Source != "rocm-smi" {
		t.Errorf("--source auto took %q; want rocm-smi (amd-smi refuses, rocm-smi answers before nvidia-smi)", m.Source)
	}
}

func TestAmdSmiMI300XBusyLeftOut(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serveAmdSmiMI300X()
	n.serveRocmSmiSeed() // present, but auto must take amd-smi first

	m, _ := topoJSON(t, n.env, "--source", "amd-smi")
	if m.Source != "amd-smi" || len(m.Devices) != 8 {
		t.Fatalf("source %q, %d devices; want amd-smi, 8", m.Source, len(m.Devices))
	}
	if len(m.Links) != 28 {
		t.Fatalf("%d links, want 28", len(m.Links))
	}
	for _, l := range m.Links {
		if l.Type != topology.LinkXGMI || !l.Direct || l.MaxBandwidth != 50000 {
			t.Errorf("link %d-%d: %s %d MB/s direct %v; want XGMI 50000 direct", l.A, l.B, l.Type, l.MaxBandwidth, l.Direct)
		}
	}
	bdfs := []string{"0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0", "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0"}
	for i, d := range m.Devices {
		if d.PCIAddress != bdfs[i] {
			t.Errorf("GPU %d at %q, want %s", i, d.PCIAddress, bdfs[i])
		}
		// The fixture: GPU 3 runs two processes, GPU 5 one.
		if want := i == 3 || i == 5; d.Busy != want {
			t.Errorf("GPU %d busy=%v (%s), want %v", i, d.Busy, d.BusyReason, want)
		}
	}

	p := dryRun(t, n.env, "--source", "amd-smi", "--ngpus", "6", "x.py")
	if p.VisibleDevices != "0,1,2,4,6,7" {
		t.Errorf("--ngpus 6 chose %q; want the six idle GPUs 0,1,2,4,6,7", p.VisibleDevices)
	}
	r := runAmdrun(t, n.env, "--source", "amd-smi", "--ngpus", "7", "--dry-run", "x.py")
	if r.code != 1 {
		t.Fatalf("--ngpus 7 with 2 busy of 8: exit %d, want 1\n%s", r.code, r.stderr)
	}
	if line := oneErrorLine(t, r); !strings.Contains(line, "busy: 3") || !strings.Contains(line, "5 (") {
		t.Errorf("error %q should name devices 3 and 5 busy", line)
	}

	m, _ = topoJSON(t, n.env, "--source", "auto", "--sysfs-root", t.TempDir())
	if m.Source != "amd-smi" {
		t.Errorf("--source auto took %q; want amd-smi (tried before rocm-smi)", m.Source)
	}
}

func TestSysfsKFDTrees(t *testing.T) {
	testutil.EndToEnd(t)
	env := toolEnv(t, systemPath())
	kfd := func(tree string) string { return testutil.KFD(t, tree) }
	for _, tc := range []struct {
		tree     string
		devices  int
		numa     func(i int) int
		packages int // distinct non-empty packages
		links    []struct {
			a, b   int
			typ    topology.LinkType
			max    int64
			direct bool
		}
	}{
		{
			tree: "topo-mi210-xgmi-pcie", devices: 8, numa: func(i int) int { return i / 4 },
			links: []struct {
				a, b   int
				typ    topology.LinkType
				max    int64
				direct bool
			}{
				{0, 1, topology.LinkXGMI, 50000, true}, {2, 3, topology.LinkXGMI, 50000, true},
				{4, 7, topology.LinkXGMI, 50000, true},
				{0, 4, topology.LinkPCIe, 0, false}, {3, 4, topology.LinkPCIe, 0, false},
			},
		},
		{
			tree: "topo-mi300-cpx", devices: 63, packages: 8, numa: func(i int) int { return i / 32 },
			links: []struct {
				a, b   int
				typ    topology.LinkType
				max    int64
				direct bool
			}{
				{0, 7, topology.LinkXGMI, 819200, true}, // partitions of one GPU
				{0, 8, topology.LinkXGMI, 50000, true},  // two GPUs
				{56, 62, topology.LinkXGMI, 819200, true},
				{0, 62, topology.LinkXGMI, 50000, true},
			},
		},
		{
			tree: "topology-parsing-mi308", devices: 32, packages: 8, numa: func(i int) int { return i / 16 },
			links: []struct {
				a, b   int
				typ    topology.LinkType
				max    int64
				direct bool
			}{
				{0, 3, topology.LinkXGMI, 819200, true},
				{3, 4, topology.LinkXGMI, 50000, true},
				{0, 31, topology.LinkXGMI, 50000, true},
			},
		},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			m, _ := topoJSON(t, env, "--source", "sysfs", "--sysfs-root", kfd(tc.tree))
			if m.Source != "sysfs" || len(m.Devices) != tc.devices {
				t.Fatalf("source %q, %d devices; want sysfs, %d", m.Source, len(m.Devices), tc.devices)
			}
			if want := tc.devices * (tc.devices - 1) / 2; len(m.Links) != want {
				t.Errorf("%d links, want %d (every pair)", len(m.Links), want)
			}
			pkgs := map[string]int{}
			for i, d := range m.Devices {
				if d.NUMANode != tc.numa(i) {
					t.Errorf("device %d on NUMA node %d, want %d", i, d.NUMANode, tc.numa(i))
				}
				if d.Package != "" {
					pkgs[d.Package]++
				}
			}
			if len(pkgs) != tc.packages {
				t.Errorf("%d packages %v, want %d", len(pkgs), pkgs, tc.packages)
			}
			for _, w := range tc.links {
				l := link(t, m, w.a, w.b)
				if l.Type != w.typ || l.Direct != w.direct || (w.direct && l.MaxBandwidth != w.max) {
					t.Errorf("link %d-%d: %s %d MB/s direct %v; want %s %d direct %v", w.a, w.b, l.Type, l.MaxBandwidth, l.Direct, w.typ, w.max, w.direct)
				}
			}
			if tc.tree == "topo-mi210-xgmi-pcie" && m.Devices[0].Hive == m.Devices[4].Hive {
				t.Errorf("GPUs 0 and 4 share hive %q; the tree has two hives", m.Devices[0].Hive)
			}
		})
	}

	t.Run("cpx-ngpus-8-one-package", func(t *testing.T) {
		root := kfd("topo-mi300-cpx")
		m, _ := topoJSON(t, env, "--source", "sysfs", "--sysfs-root", root)
		p := dryRun(t, env, "--source", "sysfs", "--sysfs-root", root, "--ngpus", "8", "x.py")
		if len(p.Devices) != 8 {
			t.Fatalf("chose %v, want 8 devices", p.Devices)
		}
		pkg := m.Devices[p.Devices[0]].Package
		for _, d := range p.Devices {
			if m.Devices[d].Package != pkg || pkg == "" {
				t.Errorf("chose %v: device %d is in package %q, not %q; the 8 partitions of one GPU share 819.2 GB/s links", p.Devices, d, m.Devices[d].Package, pkg)
			}
		}
	})
}

func TestBadToolOutputOneLine(t *testing.T) {
	testutil.EndToEnd(t)
	seed := testutil.ReadFile(t, testutil.Testdata(t, "rocm-smi", "mi250-seed-collapsed.txt"))
	truncated := strings.Join(strings.SplitAfter(string(seed), "\n")[:16], "") // 1 of 8 bandwidth rows
	nvOut := testutil.ReadFile(t, testutil.Testdata(t, "nvidia-smi", "h200x2-real.topo-m.txt"))
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"nvidia-smi output", string(nvOut), []string{"rocm-smi"}},
		{"truncated matrix", truncated, []string{"rocm-smi", "line 16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t)
			n.serveText("rocm-smi", tc.text, rocmsmi.TopoArgs...)
			r := runAmdrun(t, n.env, "topo", "--source", "rocm-smi")
			if r.code == 0 {
				t.Fatalf("exit 0 on bad rocm-smi output:\n%s", r.stdout)
			}
			if strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("want exactly one stderr line, got:\n%s", r.stderr)
			}
			line := oneErrorLine(t, r)
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("error %q should mention %q", line, w)
				}
			}
		})
	}

	t.Run("tool exits 3", func(t *testing.T) {
		bin := t.TempDir()
		const msg = "ERROR: amdgpu driver is not loaded"
		for _, tool := range vendorTools[:3] {
			script := fmt.Sprintf("#!/bin/sh\necho '%s: %s' >&2\nexit 3\n", tool, msg)
			if err := os.WriteFile(filepath.Join(bin, tool), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		env := toolEnv(t, bin+string(os.PathListSeparator)+systemPath())
		for _, tool := range vendorTools[:3] {
			r := runAmdrun(t, env, "topo", "--source", tool)
			if r.code != 1 {
				t.Errorf("%s: exit %d, want 1\n%s", tool, r.code, r.stderr)
				continue
			}
			line := oneErrorLine(t, r)
			if !strings.HasPrefix(line, "amdrun: "+tool) || !strings.Contains(line, msg) || !strings.Contains(line, "3") {
				t.Errorf("%s: error %q should name the tool, its exit status and its message %q", tool, line, msg)
			}
		}
	})

	t.Run("tool not on PATH", func(t *testing.T) {
		env := toolEnv(t, systemPath())
		r := runAmdrun(t, env, "topo", "--source", "nvidia-smi")
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("exit %d, want 1 and one stderr line:\n%s", r.code, r.stderr)
		}
		if line := oneErrorLine(t, r); !strings.Contains(line, "nvidia-smi") || !strings.Contains(line, "not found") {
			t.Errorf("error %q should say nvidia-smi was not found", line)
		}
	})

	t.Run("auto finds nothing", func(t *testing.T) {
		env := toolEnv(t, systemPath())
		args := []string{"topo", "--source", "auto", "--sysfs-root", t.TempDir()}
		r := runAmdrun(t, env, args...)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("amdrun %v: exit %d, want 1 and one stderr line:\n%s", args, r.code, r.stderr)
		}
		if line := oneErrorLine(t, r); !strings.HasPrefix(line, "amdrun: no GPU found") {
			t.Errorf("amdrun %v: error %q should start with \"amdrun: no GPU found\"", args, line)
		}
		// A launch runs CPU ranks instead, saying why in one line.
		r = runAmdrun(t, env, "--sysfs-root", t.TempDir(), "--ngpus", "1", "--no-python", "true")
		// (The empty root has no NUMA nodes either: a second warning.)
		if r.code != 0 || strings.Count(r.stderr, "no GPU") != 1 || !strings.HasPrefix(r.stderr, "amdrun: warning: no GPU found on this machine: running 1 CPU rank(s)") {
			t.Errorf("launch without a GPU: exit %d, stderr %q; want 0 and one line saying no GPU was found", r.code, r.stderr)
		}
	})
}
