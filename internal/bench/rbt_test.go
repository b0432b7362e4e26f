package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/rbt"
)

// pcie2 is a finished model of two PCIe GPUs at the given addresses.
func pcie2(t *testing.T, a, b string) *topology.Model {
	t.Helper()
	m := &topology.Model{Source: "test", Devices: []topology.Device{
		{Index: 0, NUMANode: -1, PCIAddress: a}, {Index: 1, RuntimeIndex: 1, NUMANode: -1, PCIAddress: b}}}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}

// The tool's matrices have the copy's source as the row: on the published
// Radeon VII (bus 0d) / RX 6900 XT (bus 10) run, 0 -> 1 is 47.080 GB/s
// and 1 -> 0 81.621. The cached d2d_mb_s keeps that orientation (it
// stored 81621 at [0][1]), the model is left theoretical, and applying
// the cache gives the link both figures.
func TestFromRBTKeepsDirection(t *testing.T) {
	out := testutil.ReadFile(t, testutil.Public(t, "rocm-bandwidth-test-v2.5.1-radeon-vii-rx6900xt.txt"))
	m := pcie2(t, "0000:0d:00.0", "0000:10:00.0")
	r, err := FromRBT(m, out, "node1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.D2D[0][1] != 47080 || r.D2D[1][0] != 81621 || r.D2D[0][0] != 0 {
		t.Errorf("d2d %v, want [[0 47080] [81621 0]]", r.D2D)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"d2d_mb_s":[[0,47080],[81621,0]]`) {
		t.Errorf("JSON %s", b)
	}
	if l := m.Link(0, 1); l.Measured || m.Bandwidth != "theoretical" {
		t.Errorf("FromRBT changed the model: %+v, bandwidth %q", *l, m.Bandwidth)
	}
	if err := Apply(m, r); err != nil {
		t.Fatal(err)
	}
	if l := m.Link(0, 1); l.MinBandwidth != 47080 || l.MaxBandwidth != 81621 || !l.Measured || l.P2P != topology.P2PAvailable {
		t.Errorf("applied link %+v", *l)
	}
}

// A run without peer-to-peer access between the GPUs is a valid
// measurement: the pair is recorded, survives the cache and is applied.
func TestFromRBTWithoutP2P(t *testing.T) {
	out := testutil.ReadFile(t, testutil.Public(t, "rocm-bandwidth-test-v2.0.1-2x-wx8100-no-p2p.txt"))
	m := pcie2(t, "0000:07:00.0", "0000:0d:00.0")
	var warns []string
	r, err := FromRBT(m, out, "node1", func(f string, a ...any) { warns = append(warns, f) })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.NoP2P) != 1 || r.NoP2P[0] != [2]int{0, 1} || r.D2D[0][1] != 0 || len(warns) != 1 {
		t.Fatalf("NoP2P %v, d2d %v, warnings %q", r.NoP2P, r.D2D, warns)
	}
	path := CachePath(t.TempDir(), "node1", r.Keys)
	if err := Save(path, r); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path, m.Keys())
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(m, back); err != nil {
		t.Fatal(err)
	}
	if l := m.Link(0, 1); l.P2P != topology.P2PUnavailable || l.Measured {
		t.Errorf("applied link %+v", *l)
	}
	if m.BW(0, 1) != topology.HostStaged(topology.DefaultHostBandwidth, 0) {
		t.Errorf("BW %d, want host-staged", m.BW(0, 1))
	}

	// A run with no GPU pair at all is refused as before.
	excerpt := testutil.ReadFile(t, testutil.Public(t, "rocm-bandwidth-test-bidir-excerpt-mi250-8gcd-2cpu-redacted.txt"))
	m8 := &topology.Model{Source: "test"}
	for i := 0; i < 8; i++ {
		m8.Devices = append(m8.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: -1})
	}
	if err := m8.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := FromRBT(m8, excerpt, "node1", nil); !errors.Is(err, rbt.ErrNoPeerFigures) {
		t.Errorf("excerpt: %v", err)
	}
}

// rocm-bandwidth-test 7.x prints its help when run bare; bench then runs
// its TransferBench plugin's p2p test and reads those tables.
func TestMeasureToolRBTNext(t *testing.T) {
	tb := testutil.ReadFile(t, testutil.Public(t, "rocm-bandwidth-test-tb-p2p-transferbench-v1.50-2cpu-8gpu.txt"))
	m := &topology.Model{Source: "test"}
	for i := 0; i < 8; i++ {
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: -1})
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	var calls []string
	run := func(args ...string) ([]byte, error) {
		calls = append(calls, strings.Join(args, " "))
		if len(args) == 0 {
			return []byte("Usage: rocm_bandwidth_test [OPTIONS] [SUBCOMMAND]\n"), nil
		}
		return tb, nil
	}
	var warns []string
	r, err := measureTool(run, m, "node1", func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(calls, "|") != "|plugin --run tb p2p" || r.D2D[0][1] != 64580 || r.D2D[1][0] != 66520 {
		t.Errorf("calls %q, d2d[0][1] %v, [1][0] %v", calls, r.D2D[0][1], r.D2D[1][0])
	}
	// The tables name no bus, but amdrun ran the tool here: HIP's order
	// is the tool's, nothing to warn about (a file given to amdrun topo
	// --measured is warned about: rbt's TestApplyWithoutBusSaysSo).
	if len(warns) != 0 {
		t.Errorf("warnings %q, want none", warns)
	}

	// An old tool that fails keeps its own error.
	boom := errors.New("rocm_bandwidth_test: exit status 1: hsa_init failed")
	if _, err := measureTool(func(args ...string) ([]byte, error) {
		if len(args) == 0 {
			return nil, boom
		}
		return nil, errors.New("unknown option plugin")
	}, m, "node1", nil); err != boom {
		t.Errorf("err = %v, want the bare run's", err)
	}
}
