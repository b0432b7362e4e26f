package amdsmi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

func seed(f *testing.F) {
	var files []string
	for _, g := range []string{testutil.Public(f, "amd-smi-*"), testutil.Testdata(f, "amd-smi", "*")} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	for _, p := range files {
		if filepath.Ext(p) == ".md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkErr fails on an error that is not a one-line *topology.ParseError.
func checkErr(t *testing.T, err error) {
	var pe *topology.ParseError
	if !errors.As(err, &pe) || bytes.ContainsRune([]byte(err.Error()), '\n') {
		t.Fatalf("error %q is not a one-line ParseError", err)
	}
}

// FuzzTopology feeds both topology parsers; every successful parse must
// build a model that validates.
func FuzzTopology(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (*Topology, error){
			func(b []byte) (*Topology, error) { return ParseTopology(bytes.NewReader(b)) },
			func(b []byte) (*Topology, error) { return ParseTopologyJSON(bytes.NewReader(b)) },
		} {
			top, err := parse(data)
			if err != nil {
				checkErr(t, err)
				continue
			}
			m, err := Build(top, nil, nil)
			if err != nil {
				t.Fatalf("parsed but did not build: %v", err)
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzIdentity feeds the identity and use parsers, and builds a model of
// the hand-made MI300X topology with whatever they return.
func FuzzIdentity(f *testing.F) {
	seed(f)
	top := testutil.ReadFile(f, testutil.Testdata(f, "amd-smi", "mi300x-8gpu-spx-topology.txt"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var gpus []GPU
		if s, err := ParseDefault(bytes.NewReader(data)); err != nil {
			checkErr(t, err)
		} else {
			gpus = append(gpus, s.GPUs...)
		}
		for _, p := range []func() ([]GPU, error){
			func() ([]GPU, error) { return ParseListJSON(bytes.NewReader(data)) },
		} {
			g, err := p()
			if err != nil {
				checkErr(t, err)
				continue
			}
			gpus = mergeGPUs(gpus, g)
		}
		if _, err := ParseProcessJSON(bytes.NewReader(data)); err != nil {
			checkErr(t, err)
		}
		if _, err := ParseMemUsageJSON(bytes.NewReader(data)); err != nil {
			checkErr(t, err)
		}
		tp, err := ParseTopology(bytes.NewReader(top))
		if err != nil {
			t.Fatal(err)
		}
		m, err := Build(tp, gpus, nil)
		if err != nil {
			t.Fatalf("build with parsed identities: %v", err)
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDiscover feeds Discover the topology, the default table and the
// list at once, so that the checks between calls (the same GPUs in each)
// meet arbitrary outputs: nothing may panic, an error is one line, and a
// model must validate.
func FuzzDiscover(f *testing.F) {
	read := func(name string) []byte { return testutil.ReadFile(f, testutil.Testdata(f, "amd-smi", name)) }
	f.Add(read("mi300x-8gpu-spx-topology.txt"), read("mi300x-8gpu-spx-default.txt"), read("mi300x-8gpu-spx-list.json"))
	f.Add(testutil.ReadFile(f, testutil.Public(f, "amd-smi-topology-mi355x-8gpu-xgmi.txt")), testutil.ReadFile(f, testutil.Public(f, "amd-smi-default-mi355x-8gpu.txt")), []byte("[]"))
	f.Add(testutil.ReadFile(f, testutil.Public(f, "amd-smi-topology-mi300x-8gpu-xgmi.txt")), testutil.ReadFile(f, testutil.Public(f, "amd-smi-default-mi300x-dpx-16dev-derived.txt")), []byte("[]"))
	f.Fuzz(func(t *testing.T, topo, deflt, list []byte) {
		outs := map[string][]byte{"topology": topo, "": deflt, "list --json": list}
		run := func(_ context.Context, name string, args ...string) ([]byte, error) {
			if b, ok := outs[strings.Join(args, " ")]; ok {
				return b, nil
			}
			return nil, &topology.ToolError{Tool: name, Args: args, ExitCode: 2}
		}
		m, err := Discover(context.Background(), run, nil)
		testutil.CheckOutcome(t, err, func() error { return m.Validate() })
	})
}

// FuzzJoinPartitions joins arbitrary default tables to the real MI300X
// topology (and arbitrary topologies to the DPX table): a join gives one
// row per listed device, each with its GPU's links, partitions of one
// GPU linked by XGMI, and a model that validates; a refusal leaves the
// topology as it was.
func FuzzJoinPartitions(f *testing.F) {
	pub := func(name string) []byte { return testutil.ReadFile(f, testutil.Public(f, name)) }
	topo := pub("amd-smi-topology-mi300x-8gpu-xgmi.txt")
	// Not the 64-device CPX table: at 30 ms an exec it would take the fuzzer's time.
	for _, d := range []string{"amd-smi-default-mi300x-dpx-16dev-derived.txt", "amd-smi-default-mi300x-dpx-excerpt-3dev-rocm-amdsmi132.txt", "amd-smi-default-mi355x-8gpu.txt"} {
		f.Add(topo, pub(d))
	}
	f.Fuzz(func(t *testing.T, topo, deflt []byte) {
		tp, err := ParseTopology(bytes.NewReader(topo))
		if err != nil {
			checkErr(t, err)
			return
		}
		s, err := ParseDefault(bytes.NewReader(deflt))
		if err != nil {
			checkErr(t, err)
			return
		}
		j, ok := JoinPartitions(tp, s.GPUs)
		if !ok {
			if j != tp {
				t.Fatal("a refused join changed the topology")
			}
			return
		}
		if len(j.BDFs) != len(s.GPUs) {
			t.Fatalf("%d rows for %d devices", len(j.BDFs), len(s.GPUs))
		}
		row := map[string]int{}
		for i, b := range tp.BDFs {
			row[slotOf(b)] = i
		}
		for a := range j.BDFs {
			for b := range j.BDFs {
				pa, pb := row[slotOf(j.BDFs[a])], row[slotOf(j.BDFs[b])]
				switch {
				case a != b && pa == pb:
					if j.Pairs[a][b].Type != topology.TypeXGMI {
						t.Fatalf("partitions %d and %d of one GPU: %+v", a, b, j.Pairs[a][b])
					}
				case pa != pb && j.Pairs[a][b] != tp.Pairs[pa][pb]:
					t.Fatalf("pair %d-%d %+v, its GPUs' %+v", a, b, j.Pairs[a][b], tp.Pairs[pa][pb])
				}
			}
		}
		m, err := Build(j, s.GPUs, nil)
		if err != nil {
			t.Fatalf("joined but did not build: %v", err)
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
