package amdsmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// collect returns a Warner that appends to *w.
func collect(w *[]string) topology.Warner {
	return func(format string, args ...any) { *w = append(*w, fmt.Sprintf(format, args...)) }
}

// table prints one amd-smi text table over bdfs.
func table(title string, bdfs []string, cell func(r, c int) string) string {
	var b strings.Builder
	b.WriteString(title + ":\n             " + strings.Join(bdfs, " ") + "\n")
	for r := range bdfs {
		b.WriteString(bdfs[r])
		for c := range bdfs {
			b.WriteString(" " + cell(r, c))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// counts is a count-table cell function: 0 on the diagonal, v elsewhere.
func counts(v string) func(r, c int) string {
	return func(r, c int) string {
		if r == c {
			return "0"
		}
		return v
	}
}

var mi100BDFs = []string{"0000:83:00.0", "0000:a3:00.0", "0000:c3:00.0", "0000:e3:00.0"}

// mi100 is a 4 x MI100 `amd-smi topology` whose pair 0-1 reads XGMI at
// row xr, column xc and PCIE the other way, all weights 72 and hops 3.
func mi100(xr, xc int) string {
	return table("WEIGHT TABLE", mi100BDFs, counts("72")) +
		table("HOPS TABLE", mi100BDFs, counts("3")) +
		table("LINK TYPE TABLE", mi100BDFs, func(r, c int) string {
			switch {
			case r == c:
				return "SELF"
			case r == xr && c == xc:
				return "XGMI"
			}
			return "PCIE"
		})
}

// The 4 x MI100 case of issue 24, in both row orders: weight 72 and hops
// 3 say PCIe, with one warning; the first reading decided before (XGMI
// at 50 GB/s when row 0 said XGMI).
func TestLinkTypeConflictMI100BothOrders(t *testing.T) {
	for _, at := range [][2]int{{0, 1}, {1, 0}} {
		top, err := ParseTopology(strings.NewReader(mi100(at[0], at[1])))
		if err != nil {
			t.Fatal(err)
		}
		var warns []string
		m, err := Build(top, nil, collect(&warns))
		if err != nil {
			t.Fatal(err)
		}
		if l := m.Link(0, 1); l.Type != topology.LinkPCIe || l.Direct || l.Weight != 72 || l.Hops != 3 {
			t.Errorf("XGMI at %v: link %+v, want PCIe weight 72 hops 3", at, *l)
		}
		want := []string{
			"amd-smi: amd-smi topology has no ACCESS, NUMA BW table; assuming peer access as the link allows; bandwidths by link type",
			"amd-smi: 0000:83:00.0-0000:a3:00.0: link type PCIE one way and XGMI the other; weight 72 and hops 3 say PCIE",
		}
		if strings.Join(warns, "\n") != strings.Join(want, "\n") {
			t.Errorf("XGMI at %v: warnings\n%q\nwant\n%q", at, warns, want)
		}
	}
}

// The consistency checks rocm-smi's matrices get: an asymmetric WEIGHT
// table, a non-zero HOPS diagonal, SELF off the diagonal of LINK TYPE
// are refused at the cell (they were accepted); a marker line is named.
func TestTopologyConsistency(t *testing.T) {
	b := []string{"0000:0c:00.0", "0000:22:00.0"}
	weights := table("WEIGHT TABLE", b, counts("15"))
	for _, tc := range []struct {
		name, in string
		want     *topology.ParseError
	}{
		{"asymmetric weight", table("WEIGHT TABLE", b, func(r, c int) string { return []string{"0", "15", "72", "0"}[r*2+c] }),
			&topology.ParseError{Source: SourceTopology, Line: 4, Column: 13, Err: fmt.Errorf("%w: WEIGHT TABLE: 0000:22:00.0-0000:0c:00.0 weight is 72 but 0000:0c:00.0-0000:22:00.0 is 15; a row or column is out of place", topology.ErrInconsistent)}},
		{"hops diagonal", weights + table("HOPS TABLE", b, func(r, c int) string { return []string{"0", "1", "1", "1"}[r*2+c] }),
			&topology.ParseError{Source: SourceTopology, Line: 8, Column: 15, Err: fmt.Errorf("%w: HOPS TABLE: 0000:22:00.0's hops to itself is 1, not 0; a row or column is out of place", topology.ErrInconsistent)}},
		{"SELF off the diagonal", table("LINK TYPE TABLE", b, func(r, c int) string { return []string{"SELF", "XGMI", "SELF", "XGMI"}[r*2+c] }),
			&topology.ParseError{Source: SourceTopology, Line: 4, Column: 13, Err: fmt.Errorf("%w: LINK TYPE TABLE: 0000:22:00.0-0000:0c:00.0 is SELF; a row or column is out of place", topology.ErrInconsistent)}},
		{"marker after a table", weights + "[output truncated]\n",
			&topology.ParseError{Source: SourceTopology, Line: 5, Err: fmt.Errorf("%w: %q after the WEIGHT TABLE, where a table title or the end was expected", topology.ErrTruncated, "[output truncated]")}},
		{"marker inside a table", strings.Join(strings.SplitAfter(weights, "\n")[:3], "") + "...\n",
			&topology.ParseError{Source: SourceTopology, Line: 4, Err: fmt.Errorf("%w: WEIGHT TABLE has 1 of 2 rows, then %q", topology.ErrTruncated, "...")}},
		{"table twice", weights + weights,
			&topology.ParseError{Source: SourceTopology, Line: 5, Err: fmt.Errorf("%w: WEIGHT TABLE appears twice", topology.ErrSyntax)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTopology(strings.NewReader(tc.in))
			var pe *topology.ParseError
			if !errors.As(err, &pe) || *pe != *tc.want && (pe.Line != tc.want.Line || pe.Column != tc.want.Column || pe.Err.Error() != tc.want.Err.Error()) {
				t.Fatalf("err = %v\nwant %v", err, tc.want)
			}
			if !errors.Is(err, unwrapAll(tc.want.Err)) {
				t.Fatalf("errors.Is(%v, %v) fails", err, unwrapAll(tc.want.Err))
			}
		})
	}
}

// The published capture that ends in an "[output truncated]" marker
// (derived: the MI300X capture cut after its WEIGHT table) is refused
// with the marker named; it was "has more than 8 rows".
func TestOutputTruncatedMarker(t *testing.T) {
	_, err := ParseTopology(bytes.NewReader(public(t, "amd-smi-topology-mi300x-8gpu-output-truncated-marker-derived.txt")))
	want := `amd-smi topology: line 22: input ends early: "[output truncated]" after the WEIGHT TABLE, where a table title or the end was expected`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// Each of the five tables left out of the real MI300X capture: one
// warning naming it and what was assumed (it was silent: a missing LINK
// TYPE made every pair an assumed PCIe link), and a model that is still
// right where the rest decides it: without LINK TYPE, weight 15 and hops
// 1 make every pair XGMI.
func TestMissingTables(t *testing.T) {
	for _, tc := range []struct {
		file, warning     string
		weight, hops      int
		bw                int64
		assumed, p2pKnown bool
	}{
		{"no-access", "amd-smi: amd-smi topology has no ACCESS table; assuming peer access as the link allows", 15, 1, 50000, false, false},
		{"no-weight", "amd-smi: amd-smi topology has no WEIGHT table; assuming weights 0", 0, 1, 50000, false, false},
		{"no-hops", "amd-smi: amd-smi topology has no HOPS table; assuming hops by link type", 15, 1, 50000, false, false},
		{"no-link-type", "amd-smi: amd-smi topology has no LINK TYPE table; assuming link types from weight and hops (a pair they do not decide goes through the host)", 15, 1, 50000, false, false},
		{"no-numa-bw", "amd-smi: amd-smi topology has no NUMA BW table; assuming bandwidths by link type", 15, 1, topology.XGMILinkBandwidth, true, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			top, err := ParseTopology(bytes.NewReader(public(t, "amd-smi-topology-mi300x-8gpu-"+tc.file+"-table-derived.txt")))
			if err != nil {
				t.Fatal(err)
			}
			var warns []string
			m, err := Build(top, nil, collect(&warns))
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != 1 || warns[0] != tc.warning {
				t.Errorf("warnings %q, want [%q]", warns, tc.warning)
			}
			checkAllXGMI(t, m, tc.weight, tc.bw, tc.assumed)
		})
	}
}

// DPX and CPX MI300X through amd-smi: the default table lists 16 or 64
// logical devices, `amd-smi topology` the 8 physical GPUs. amdrun refused
// the node ("`amd-smi topology` lists 8 GPU(s), `amd-smi` 16"); now the
// partitions inherit their GPU's links, and the partitions of one GPU are
// one package, numbered by PCI function, as the KFD source models them.
func TestPartitionedMI300X(t *testing.T) {
	for _, tc := range []struct {
		deflt string
		parts int
	}{
		{"amd-smi-default-mi300x-dpx-16dev-derived.txt", 2},
		{"amd-smi-default-mi300x-cpx-64dev-derived.txt", 8},
	} {
		t.Run(tc.deflt, func(t *testing.T) {
			var calls, warns []string
			run := fakeRun(t, map[string]string{
				"amd-smi topology": "public:amd-smi-topology-mi300x-8gpu-xgmi.txt",
				"amd-smi":          "public:" + tc.deflt,
			}, &calls)
			m, err := Discover(context.Background(), run, collect(&warns))
			if err != nil {
				t.Fatal(err)
			}
			n := 8 * tc.parts
			if m.N() != n || len(m.Packages()) != 8 {
				t.Fatalf("%d devices in %d packages, want %d in 8", m.N(), len(m.Packages()), n)
			}
			join := fmt.Sprintf("amd-smi: `amd-smi topology` lists 8 GPUs, `amd-smi` %d partitions of them; each partition takes its GPU's links, and partitions of one GPU are one package joined by XGMI", n)
			if len(warns) == 0 || warns[0] != join {
				t.Errorf("warnings %q, want first %q", warns, join)
			}
			for i, d := range m.Devices {
				gpu, part := i/tc.parts, i%tc.parts
				bdf := mi300xBDFs[gpu][:len(mi300xBDFs[gpu])-1] + fmt.Sprint(part)
				if d.PCIAddress != bdf || d.Package != bdf[:len(bdf)-2] || d.Partition != part || d.RuntimeIndex != i {
					t.Fatalf("device %d = %+v, want %s partition %d of %s", i, d, bdf, part, bdf[:len(bdf)-2])
				}
			}
			for a := 0; a < n; a++ {
				for b := a + 1; b < n; b++ {
					l := m.Link(a, b)
					same := a/tc.parts == b/tc.parts
					if l.Type != topology.LinkXGMI || !l.Direct || l.Hops != 1 {
						t.Fatalf("link %d-%d = %+v, want XGMI direct hops 1", a, b, *l)
					}
					if !same && (l.Weight != 15 || l.MaxBandwidth != 50000 || l.Assumed) {
						t.Fatalf("link %d-%d = %+v, want its GPUs' link (weight 15, 50000 MB/s)", a, b, *l)
					}
				}
			}
		})
	}
}

// The published DPX excerpt (ROCm/amdsmi#132) reads: two partitions of
// 0000:05:00.0 and one of 0000:26:00.0, with their HIP-IDs, mode and
// memory; a partition's OAM-ID and mode are N/A.
func TestDefaultDPXExcerpt(t *testing.T) {
	s, err := ParseDefault(bytes.NewReader(public(t, "amd-smi-default-mi300x-dpx-excerpt-3dev-rocm-amdsmi132.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != "26.0.2+39589fda" || len(s.GPUs) != 3 {
		t.Fatalf("version %q, %d GPUs", s.Version, len(s.GPUs))
	}
	g := s.GPUs[1]
	if g.BDF != "0000:05:00.1" || g.Index != 1 || g.HIPID != 1 || g.MemUsedMiB != 492 || g.MemTotalMiB != 98296 {
		t.Errorf("partition 1 = %+v", g)
	}
	if g := s.GPUs[0]; g.MemTotalMiB != 196592 {
		t.Errorf("GPU 0 = %+v", g)
	}
	top := table("WEIGHT TABLE", []string{"0000:05:00.0", "0000:26:00.0"}, counts("15")) +
		table("HOPS TABLE", []string{"0000:05:00.0", "0000:26:00.0"}, counts("1"))
	tp, err := ParseTopology(strings.NewReader(top))
	if err != nil {
		t.Fatal(err)
	}
	j, ok := JoinPartitions(tp, s.GPUs)
	if !ok || len(j.BDFs) != 3 || j.Pairs[1][2].Weight != 15 || j.Pairs[0][1].Type != topology.TypeXGMI {
		t.Fatalf("join = %v %+v", ok, j)
	}
}

// A device list whose extra addresses are not further functions of the
// topology's GPUs is still refused as inconsistent, naming both calls.
func TestPartitionJoinRefusesStrangers(t *testing.T) {
	s, err := ParseDefault(bytes.NewReader(public(t, "amd-smi-default-mi300x-dpx-16dev-derived.txt")))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := ParseTopology(bytes.NewReader(public(t, "amd-smi-topology-mi300x-8gpu-xgmi.txt")))
	if err != nil {
		t.Fatal(err)
	}
	s.GPUs[3].BDF = "0000:23:00.1" // no GPU 0000:23:00.0
	if _, ok := JoinPartitions(tp, s.GPUs); ok {
		t.Fatal("joined a partition of no listed GPU")
	}
	s.GPUs[3].BDF = "0000:22:00.1"
	short := append([]GPU{}, s.GPUs[2:]...) // 0000:0c:00.0 itself missing
	if _, ok := JoinPartitions(tp, short); ok {
		t.Fatal("joined a list without one of the GPUs")
	}
	err = agreeBDFs(SourceTopology, tp.BDFs, SourceDefault, short)
	if !errors.Is(err, topology.ErrInconsistent) || !strings.Contains(err.Error(), "only `amd-smi topology` has 0000:0c:00.0") {
		t.Fatalf("err = %v", err)
	}
}

// When `amd-smi topology` fails or prints no table, Discover reads
// `amd-smi topology --json` (ParseTopologyJSON's user path), with one
// warning naming why.
func TestDiscoverTopologyJSONFallback(t *testing.T) {
	var calls, warns []string
	run := fakeRun(t, map[string]string{
		"amd-smi topology --json": "mi300x-8gpu-spx-topology.json",
	}, &calls)
	m, err := Discover(context.Background(), run, collect(&warns))
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 8 || calls[0] != "amd-smi topology" || calls[1] != "amd-smi topology --json" {
		t.Fatalf("%d devices, calls %q", m.N(), calls)
	}
	if want := "amd-smi topology: exit status 2: amd-smi: error: invalid choice; read `amd-smi topology --json` instead"; len(warns) == 0 || warns[0] != want {
		t.Errorf("warnings %q, want first %q", warns, want)
	}
	// A text output that is cut is refused, not replaced by the JSON.
	calls = nil
	cut := public(t, "amd-smi-topology-mi300x-8gpu-output-truncated-marker-derived.txt")
	inner := fakeRun(t, map[string]string{"amd-smi topology --json": "mi300x-8gpu-spx-topology.json"}, &calls)
	_, err = Discover(context.Background(), func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if len(args) == 1 && args[0] == "topology" {
			return cut, nil
		}
		return inner(ctx, name, args...)
	}, nil)
	if !errors.Is(err, topology.ErrTruncated) || len(calls) != 0 {
		t.Fatalf("err = %v, calls %q", err, calls)
	}
}
