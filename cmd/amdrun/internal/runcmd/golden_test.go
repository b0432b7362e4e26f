package runcmd_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

var update = flag.Bool("update", false, "rewrite testdata/dryrun/*.json from the current code")

// kfdRoot lays out a sysfs root holding the KFD tree name (from
// testdata/kfd) and the two-node host tree.
func kfdRoot(t *testing.T, tree ...string) string {
	t.Helper()
	host := testutil.Testdata(t, "host", "two-node")
	return testutil.LinkRoot(t, map[string]string{
		"sys/class/kfd/kfd/topology": testutil.KFD(t, tree[0], tree[1:]...),
		"sys/devices/system/node":    filepath.Join(host, "sys", "devices", "system", "node"),
	})
}

// The --dry-run --json output is a public contract (scripts read it):
// these goldens pin it byte for byte on three topologies (the bundled
// MI250 example, an 8-GPU MI210 node of two XGMI hives joined by PCIe,
// and a 63-partition MI300X CPX node) and for CPU ranks, with the text
// plan and --explain beside each. go test -update rewrites them; a diff
// there is a change of the contract.
func TestDryRunJSONGolden(t *testing.T) {
	tests := []struct {
		golden string
		kfd    []string // the KFD tree and its topology directory; nil = the bundled example
		env    []string
		args   []string
	}{
		{golden: "mi250-ring-4.json", args: []string{"--policy", "ring", "-n", "4"}},
		{golden: "mi250-2-ranks-of-2.json", env: []string{"CUDA_VISIBLE_DEVICES=0,1,2,3,4,5"}, args: []string{"-n", "4", "--nproc-per-node", "2", "--order", "links"}},
		{golden: "mi210-xgmi-pcie-6.json", kfd: []string{"topo-mi210-xgmi-pcie"}, args: []string{"-n", "6", "--bind", "exclusive"}},
		{golden: "mi300x-cpx-8.json", kfd: []string{"topo-mi300-cpx", "topology"}, args: []string{"-n", "8", "--exclude", "0-3", "--bind", "numa"}},
		{golden: "cpu-3.json", args: []string{"--ngpus", "0", "--nproc-per-node", "3", "--bind", "numa"}},
	}
	for _, tc := range tests {
		for _, form := range []string{"json", "txt"} {
			name := strings.TrimSuffix(tc.golden, ".json") + "." + form
			t.Run(name, func(t *testing.T) {
				f := newFactory(t, tc.env...)
				ios, _, out, _ := cmdtest.Streams()
				f.IOStreams = ios
				f.Topo.Bandwidth = "theoretical"
				// Binding keeps to the CPUs amdrun may use (its affinity): CPUs
				// 0 and 1, one per NUMA node, are in it on any machine of two
				// CPUs or more, so the plan does not depend on the machine.
				f.HostNUMA = func() ([]topology.NUMANode, error) {
					return []topology.NUMANode{{ID: 0, CPUs: []int{0}}, {ID: 1, CPUs: []int{1}}}, nil
				}
				if tc.kfd == nil {
					f.Discover = func(ctx context.Context, o discover.Options) (*topology.Model, error) { return discover.Example() }
				} else {
					root := kfdRoot(t, tc.kfd...)
					f.Discover = func(ctx context.Context, o discover.Options) (*topology.Model, error) {
						return discover.Discover(ctx, discover.Options{Source: "sysfs", SysfsRoot: root})
					}
				}
				args := []string{"--dry-run", "--master-port", "29500", "--rdzv-id", "golden"}
				if form == "json" {
					args = append(args, "--json")
				} else {
					args = append(args, "--explain")
				}
				args = append(append(args, tc.args...), "train.py", "--lr", "3e-4")
				if err := dryRun(t, f, t.TempDir(), args...); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(testutil.RepoRoot(t), "testdata", "dryrun", name)
				if *update {
					if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				if want := testutil.ReadFile(t, path); !bytes.Equal(out.Bytes(), want) {
					t.Errorf("--dry-run output differs from %s (go test -update rewrites it if the change is meant); got:\n%s", path, out)
				}
			})
		}
	}
}
