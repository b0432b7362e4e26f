package nvidiasmi

import (
	"bytes"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestRealH200Capture reads this project's own capture of the 2 x H200
// machine (testdata/nvidia-smi/h200x2-real.*) and checks what amdrun topo
// showed there: both GPUs, the NV18 link at 18 x 26.562 GB/s, one NUMA
// node with CPUs 0-31, nothing busy.
func TestRealH200Capture(t *testing.T) {
	read := func(what string) *bytes.Reader {
		return bytes.NewReader(testutil.ReadFile(t, testutil.Testdata(t, "nvidia-smi", "h200x2-real."+what+".txt")))
	}
	topo, err := ParseTopo(read("topo-m"))
	if err != nil {
		t.Fatal(err)
	}
	nv, err := ParseNVLinkStatus(read("nvlink-s"))
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := ParseQueryGPU(read("query-gpu"))
	if err != nil {
		t.Fatal(err)
	}
	apps, err := ParseComputeApps(read("compute-apps"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(topo, nv, gpus, apps, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 2 {
		t.Fatalf("%d devices, want 2", m.N())
	}
	l := m.Link(0, 1)
	if l.Level != "NV18" || l.Count != 18 || l.MaxBandwidth != 478116 || !l.Direct || l.Assumed {
		t.Errorf("link 0-1 = %+v, want NV18 x 26562 = 478116 MB/s, direct, reported", *l)
	}
	for i, d := range m.Devices {
		if d.NUMANode != 0 || len(d.CPUs) != 32 || d.CPUs[31] != 31 || d.Busy {
			t.Errorf("GPU%d: numa %d cpus %v busy %v, want node 0, 0-31, free", i, d.NUMANode, d.CPUs, d.Busy)
		}
		if d.Name != "NVIDIA H200" || d.MemTotalMiB != 143771 {
			t.Errorf("GPU%d: %q %d MiB", i, d.Name, d.MemTotalMiB)
		}
	}
	if m.Devices[1].PCIAddress != "0000:00:07.0" || m.Devices[0].UniqueID != "GPU-591d22d9-f40b-2202-ee83-a15239aebc6a" {
		t.Errorf("identity: %q %q", m.Devices[1].PCIAddress, m.Devices[0].UniqueID)
	}
}
