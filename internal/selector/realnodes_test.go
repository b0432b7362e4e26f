package selector

import (
	"context"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/amdsmi"
)

// realNode is one real node shape of testdata, named by what it is.
type realNode struct {
	what string
	// read builds its model as amdrun does from the files
	read func(t testing.TB) *topology.Model
}

// capture reads a capture of testdata/public or testdata/models.
func capture(file string) func(t testing.TB) *topology.Model {
	return func(t testing.TB) *topology.Model { return parseCapture(t, file) }
}

// kfdTree reads a KFD sysfs tree of testdata/kfd.
func kfdTree(tree string) func(t testing.TB) *topology.Model {
	return func(t testing.TB) *topology.Model { return readKFD(t, tree) }
}

// amdsmiJoin is amd-smi's Discover on a real `amd-smi topology` and an
// `amd-smi` default table of its GPUs' partitions (the join issue 24
// made).
func amdsmiJoin(topo, table string) func(t testing.TB) *topology.Model {
	return func(t testing.TB) *topology.Model {
		m, err := amdsmi.Discover(context.Background(), Replay(t, map[string]string{"amd-smi topology": topo, "amd-smi": table}), nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// Replay answers each amd-smi command of files (argv -> public capture)
// with the capture, and any other with amd-smi's usage error.
func Replay(t testing.TB, files map[string]string) topology.Runner {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		f, ok := files[strings.Join(append([]string{name}, args...), " ")]
		if !ok {
			return nil, &topology.ToolError{Tool: name, Args: args, ExitCode: 2, Stderr: "amd-smi: error: invalid choice\n"}
		}
		return testutil.ReadFile(t, testutil.Public(t, f)), nil
	}
}

// realNodes lists every real node shape in testdata whose pairs differ
// (in the others, a fully meshed MI300X, H100 NV18 or one GPU, every set
// is as good as any), of every source, the partitioned ones included.
// TestRealNodesListed checks that no capture realTopologies parses is
// missing.
var realNodes = []realNode{
	{"8 PCIe GPUs behind PIX/PXB switches, 2 sockets (nvidia-smi, Savio4)", capture("nvidia-smi-topo-m-8gpu-pcie-pxb-pix-sys-2nic-savio4.txt")},
	{"DGX-1 V100 NVLink hybrid cube mesh (nvidia-smi)", capture("nvidia-smi-topo-m-v100-sxm2-8gpu-dgx1-like-1nic.txt")},
	{"DGX-1 PCIe-only matrix (nvidia-smi topo -mp)", capture("nvidia-smi-topo-mp-dgx1-4nic-pcie-only.txt")},
	{"4 MI210 XGMI with measured bandwidths (rocm-smi + rocm_bandwidth_test, ARCHER2)", capture("rocm-bandwidth-test-mi210-4gpu-epyc7543p-archer2.txt")},
	{"MI250 8 GCDs (rocm-smi concise, DieEdge)", capture("rocm-smi-concise-dieedge-mi250-8gcd.txt")},
	{"MI50 8 devices (saved rocm-smi --json model)", capture("rocm-smi-json-alltopo-mi50-card0-8dev-topology.json")},
	{"8 GPUs with partial XGMI (rocm-smi --shownodesbw, release notes)", capture("rocm-smi-shownodesbw-8gpu-partial-xgmi-rocm-release-notes.txt")},
	{"MI250 8 GCDs (rocm-smi --shownodesbw)", capture("rocm-smi-shownodesbw-mi250-8gcd.txt")},
	{"MI300X TPX, 12 partitions (rocm-smi --showtopo)", capture("rocm-smi-showtopo-mi300x-tpx-broken-12-partitions.txt")},
	{"MI250 8 GCDs on 2 NUMA nodes (rocm-smi --showtoponuma)", capture("rocm-smi-showtoponuma-mi250-8gcd-2numa.txt")},
	{"MI300X DPX, 16 partitions (amd-smi topology + default table)", amdsmiJoin("amd-smi-topology-mi300x-8gpu-xgmi.txt", "amd-smi-default-mi300x-dpx-16dev-derived.txt")},
	{"MI300X CPX, 64 partitions (amd-smi topology + default table)", amdsmiJoin("amd-smi-topology-mi300x-8gpu-xgmi.txt", "amd-smi-default-mi300x-cpx-64dev-derived.txt")},
	{"8 MI210 in two XGMI hives (KFD sysfs)", kfdTree("topo-mi210-xgmi-pcie")},
	{"MI300X CPX, 63 partitions (KFD sysfs)", kfdTree("topo-mi300-cpx")},
	{"MI308X CPX, 32 partitions (KFD sysfs)", kfdTree("topology-parsing-mi308")},
}

// Every capture realTopologies finds with pairs that differ is in
// realNodes (a new capture must be listed there by what it is), and
// every listed node has pairs that differ.
func TestRealNodesListed(t *testing.T) {
	listed := map[*topology.Model]bool{}
	for _, nd := range realNodes {
		m := nd.read(t)
		if m == nil || !interesting(m) {
			t.Errorf("%s: no model whose pairs differ", nd.what)
			continue
		}
		listed[m] = true
	}
	tops, _ := realTopologies(t)
	for _, top := range tops {
		found := false
		for m := range listed {
			if sameModel(m, top.m) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s is not in realNodes", top.name)
		}
	}
}

// sameModel says a and b have the same devices' NUMA nodes and links.
func sameModel(a, b *topology.Model) bool {
	if len(a.Devices) != len(b.Devices) || len(a.Links) != len(b.Links) || a.Source != b.Source {
		return false
	}
	for i := range a.Devices {
		if a.Devices[i].NUMANode != b.Devices[i].NUMANode {
			return false
		}
	}
	for i := range a.Links {
		if a.Links[i] != b.Links[i] {
			return false
		}
	}
	return true
}
