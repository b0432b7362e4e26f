package rocmsmi

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// seeds adds every shared capture and hand-made fixture whose name ends in
// one of exts.
func seeds(f *testing.F, exts ...string) {
	var paths []string
	for _, dir := range []string{testutil.Public(f), testutil.Testdata(f, "rocm-smi")} {
		m, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil {
			f.Fatal(err)
		}
		paths = append(paths, m...)
	}
	for _, p := range paths {
		for _, e := range exts {
			if strings.HasSuffix(p, e) {
				f.Add(testutil.ReadFile(f, p))
			}
		}
	}
}

// check builds the model of a parsed report: nothing may panic, and a
// model that builds must validate.
func check(t *testing.T, r *Report) {
	m, err := r.Model(nil)
	if err != nil {
		return
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("model does not validate: %v", err)
	}
	for _, l := range m.Links {
		if m.Link(l.A, l.B) == nil {
			t.Fatalf("link %d-%d not indexed", l.A, l.B)
		}
	}
}

func FuzzParseText(f *testing.F) {
	seeds(f, ".txt")
	// Damaged titles (issue 24): run together, two on a line, escapes.
	f.Add([]byte("=== Weightbetween two GPUs ===\n  GPU0 GPU1\nGPU0 0 15\nGPU1 15 0\n" +
		"=== Hops between two GPUs ==== Link Type between two GPUs ===\n\x1b[1m=== Numa Nodes ===\x1b[0m\n" +
		"GPU 0 : (Topology) Numa Node: 0\n  GPU0 GPU1\n=== End of ROCm SMI Log ===\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseText(bytes.NewReader(data))
		if err != nil {
			if r != nil {
				t.Fatal("report with error")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		check(t, r)
	})
}

// FuzzDiscover feeds Discover three outputs at once (the topology run,
// the identity run and the concise table), so that the checks between
// calls (same GPUs, same buses and NUMA nodes, whole outputs) meet
// arbitrary pairs: nothing may panic, an error is one line, and a model
// must validate.
func FuzzDiscover(f *testing.F) {
	read := func(name string) []byte { return testutil.ReadFile(f, testutil.Public(f, name)) }
	topo, concise := read("rocm-smi-showtopo-mi308x-8gpu.txt"), read("rocm-smi-concise-mi308x-8gpu.txt")
	f.Add(topo, read("rocm-smi-u-showmeminfo-vram-mi308x-8gpu.txt"), concise)
	f.Add(read("rocm-smi-showtopo-mi300x-tpx-broken-12-partitions.txt"), []byte{}, concise)
	f.Add(testutil.ReadFile(f, testutil.Testdata(f, "rocm-smi", "mi210-8gpu-2hive-showtopo-nodesbw.txt")), read("rocm-smi-showuse-mi210-4gpu-archer2.txt"), read("rocm-smi-concise-legacy-mi210-4gpu-archer2.txt"))
	f.Fuzz(func(t *testing.T, topo, info, concise []byte) {
		outs := map[string][]byte{
			strings.Join(append([]string{Tool}, TopoArgs...), " "): topo,
			strings.Join(append([]string{Tool}, InfoArgs...), " "): info,
			Tool: concise,
		}
		run := func(_ context.Context, name string, args ...string) ([]byte, error) {
			if b, ok := outs[strings.Join(append([]string{name}, args...), " ")]; ok {
				return b, nil
			}
			return nil, &topology.ToolError{Tool: name, Args: args, ExitCode: 2}
		}
		m, err := Discover(context.Background(), run, nil)
		testutil.CheckOutcome(t, err, func() error { return m.Validate() })
	})
}
