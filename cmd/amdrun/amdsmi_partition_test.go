package main_test

import (
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// A partitioned MI300X node through amd-smi (issue 24): `amd-smi
// topology` lists the 8 physical GPUs, the default table their 16 DPX
// partitions. amdrun refused the node as inconsistent; now it reads 16
// devices in 8 packages, and two ranks get two partitions of one GPU.
func TestAmdSmiDPXPartitionsJoined(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serve("amd-smi", testutil.Public(t, "amd-smi-topology-mi300x-8gpu-xgmi.txt"), amdTopoArgs...)
	n.serve("amd-smi", testutil.Public(t, "amd-smi-default-mi300x-dpx-16dev-derived.txt"), amdDefaultArgs...)

	m, r := topoJSON(t, n.env, "--source", "amd-smi")
	if len(m.Devices) != 16 || len(m.Packages()) != 8 {
		t.Fatalf("%d devices in %d packages, want 16 in 8\n%s", len(m.Devices), len(m.Packages()), r.stderr)
	}
	if d := m.Devices[1]; d.PCIAddress != "0000:0c:00.1" || d.Package != "0000:0c:00" || d.Partition != 1 || d.RuntimeIndex != 1 {
		t.Errorf("device 1 = %+v", d)
	}
	p := dryRun(t, n.env, "--source", "amd-smi", "--ngpus", "2", "x.py")
	if p.VisibleDevices != "0,1" {
		t.Errorf("--ngpus 2 chose %q; want the two partitions of GPU 0, 0,1", p.VisibleDevices)
	}
}
