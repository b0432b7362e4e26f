package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology/pci"
)

// TestPCITreeWithoutVendorTools: on a node with no vendor tool on PATH
// and no KFD (the ESC8000A-E12's PCI tree, built from its lspci -tv
// capture), auto finds the 4 GPUs in the PCI tree, says what PCI cannot
// see, names them from the PCI ID database, and a 2-GPU job is placed on
// one socket's pair (NODE) rather than across sockets (SYS).
func TestPCITreeWithoutVendorTools(t *testing.T) {
	testutil.EndToEnd(t)
	root := testutil.PCITree(t, "esc8000a-e12")
	env := toolEnv(t, t.TempDir(), "PCIDB_PATH="+testutil.Testdata(t, "pci", "pci.ids"))
	m, r := topoJSON(t, env, "--sysfs-root", root)
	if m.Source != pci.Source || len(m.Devices) != 4 || m.Devices[0].Name != "AD102GL [RTX 6000 Ada Generation]" {
		t.Fatalf("source %q, %d devices, first named %q; want pci, 4, the RTX 6000 Ada", m.Source, len(m.Devices), m.Devices[0].Name)
	}
	if !strings.Contains(r.stderr, pci.FabricNote) {
		t.Errorf("stderr lacks the fabric note:\n%s", r.stderr)
	}
	p := dryRun(t, toolEnv(t, systemPath()), "--source", "pci", "--sysfs-root", root, "--ngpus", "2", "x.py")
	if got := fmt.Sprint(p.Devices); got != "[0 1]" {
		t.Errorf("chose %s, want [0 1] (NODE on socket 0; every cross-socket pair is SYS)", got)
	}
}
