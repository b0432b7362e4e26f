package rocmsmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// fakeRunner replays outputs keyed by the joined argv, like the fake
// rocm-smi scripts of integration tests; unknown argv exits 2.
type fakeRunner struct {
	out   map[string][]byte
	fail  map[string]error
	calls []string
}

func (f *fakeRunner) run(_ context.Context, name string, args ...string) ([]byte, error) {
	key := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, key)
	if err, ok := f.fail[key]; ok {
		return nil, err
	}
	if b, ok := f.out[key]; ok {
		return b, nil
	}
	return nil, &topology.ToolError{Tool: name, Args: args, ExitCode: 2, Stderr: "rocm-smi: error: unrecognized arguments"}
}

// endOfLog is the banner that ends every whole rocm-smi output.
const endOfLog = "================================== End of ROCm SMI Log ===================================\n"

func TestDiscoverMI250(t *testing.T) {
	// The MI250 captures were cut by their publisher before the end
	// banner; rocm-smi prints it, so the fake runs do too.
	read := func(names ...string) []byte {
		var b []byte
		for _, n := range names {
			b = append(b, testutil.ReadFile(t, public(t, n))...)
		}
		return append(b, endOfLog...)
	}
	f := &fakeRunner{out: map[string][]byte{
		"rocm-smi --showtopo --shownodesbw": read("rocm-smi-shownodesbw-mi250-8gcd.txt", "rocm-smi-showtoponuma-mi250-8gcd-2numa.txt"),
		"rocm-smi":                          read("rocm-smi-concise-dieedge-mi250-8gcd.txt"),
		"rocm-smi --version":                []byte("ROCM-SMI version: 2.0.0+abc\nROCM-SMI-LIB version: 6.0.0\n"),
	}}
	var warns []string
	m, err := Discover(context.Background(), f.run, func(s string, a ...any) { warns = append(warns, fmt.Sprintf(s, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []string{
		"rocm-smi --showtopo --shownodesbw",
		"rocm-smi --showuse --showmemuse --showmeminfo vram --showbus --showuniqueid --showproductname",
		"rocm-smi",
		"rocm-smi --version",
	}
	if !reflect.DeepEqual(f.calls, wantCalls) {
		t.Errorf("calls %q\nwant  %q", f.calls, wantCalls)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "exit status 2") {
		t.Errorf("warnings %q, want the failed info run", warns)
	}
	if m.SourceVersion != "2.0.0+abc" || m.N() != 8 || m.Devices[7].Package != "pkg3" || m.Devices[4].NUMANode != 1 {
		t.Errorf("model %v version %q devices %+v", m, m.SourceVersion, m.Devices)
	}
	wantLink(t, m, 0, 1, topology.LinkXGMI, true, 50000, 200000)
}

// Old rocm-smi has no --shownodesbw: Discover falls back to --showtopo.
func TestDiscoverFallback(t *testing.T) {
	f := &fakeRunner{out: map[string][]byte{
		"rocm-smi --showtopo": testutil.ReadFile(t, public(t, "rocm-smi-showtopo-mi308x-8gpu.txt")),
	}}
	var warns []string
	m, err := Discover(context.Background(), f.run, func(s string, a ...any) { warns = append(warns, fmt.Sprintf(s, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	if m.N() != 8 || m.SourceVersion != "" {
		t.Errorf("model %v version %q", m, m.SourceVersion)
	}
	if len(warns) != 3 || !strings.Contains(warns[0], "retrying without --shownodesbw") {
		t.Errorf("warnings %q", warns)
	}
}

func TestDiscoverErrors(t *testing.T) {
	notFound := fmt.Errorf("rocm-smi: %w", topology.ErrToolNotFound)
	t.Run("not installed", func(t *testing.T) {
		f := &fakeRunner{fail: map[string]error{"rocm-smi --showtopo --shownodesbw": notFound}}
		_, err := Discover(context.Background(), f.run, nil)
		if !errors.Is(err, topology.ErrToolNotFound) || len(f.calls) != 1 {
			t.Errorf("err %v after calls %q", err, f.calls)
		}
	})
	t.Run("tool fails", func(t *testing.T) {
		f := &fakeRunner{}
		_, err := Discover(context.Background(), f.run, nil)
		var te *topology.ToolError
		if !errors.As(err, &te) || te.ExitCode != 2 || strings.Join(te.Args, " ") != "--showtopo" {
			t.Errorf("err %v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		f := &fakeRunner{out: map[string][]byte{"rocm-smi --showtopo --shownodesbw": []byte("Segmentation fault\n")}}
		_, err := Discover(context.Background(), f.run, nil)
		if !errors.Is(err, topology.ErrWrongTool) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		f := &fakeRunner{out: map[string][]byte{"rocm-smi --showtopo --shownodesbw": testutil.ReadFile(t, public(t, "rocm-smi-showtopo-mi308x-8gpu.txt"))}}
		run := func(c context.Context, n string, a ...string) ([]byte, error) {
			defer cancel()
			return f.run(c, n, a...)
		}
		_, err := Discover(ctx, run, nil)
		if !errors.Is(err, context.Canceled) || len(f.calls) != 1 {
			t.Errorf("err %v after calls %q", err, f.calls)
		}
	})
}

// An output cut short, or two runs that disagree about the GPUs, is
// refused with one line: a NUMA section cut after its 4th GPU of 8 once
// gave a 4-GPU model, or 8 GPUs with NUMA unknown for 4, silently.
func TestDiscoverRefusesPartialOutput(t *testing.T) {
	topo := testutil.ReadFile(t, public(t, "rocm-smi-showtopo-mi308x-8gpu.txt"))
	concise := testutil.ReadFile(t, public(t, "rocm-smi-concise-mi308x-8gpu.txt"))
	numa := bytes.Index(topo, []byte("GPU[4]"))
	end := bytes.LastIndex(topo, []byte("\n=")) + 1 // the End of ROCm SMI Log banner
	for _, tc := range []struct {
		name       string
		topo, more []byte
		want       string
		sentinel   error
	}{
		{"no end banner", topo[:end], concise,
			`rocm-smi --showtopo --shownodesbw: input ends early: no "End of ROCm SMI Log" line, the output was cut short`, topology.ErrTruncated},
		{"numa section cut after GPU 3, banner added", append(append([]byte{}, topo[:numa]...), endOfLog...), concise,
			`rocm-smi: inconsistent input: the "hops between two gpus" section lists GPU 0-7 (8) but the "numa nodes" section lists GPU 0-3 (4); is the output cut short?`, topology.ErrInconsistent},
		{"concise lists fewer GPUs", topo, bytes.Replace(concise, []byte("\n7 "), []byte("\nx "), 1),
			"", nil}, // a malformed concise run only warns
		{"concise cut short", topo, concise[:bytes.Index(concise, []byte("\n4 "))+1],
			`rocm-smi: input ends early: no "End of ROCm SMI Log" line, the output was cut short`, topology.ErrTruncated},
		{"concise lists 4 of 8", topo, append(concise[:bytes.Index(concise, []byte("\n4 "))+1], endOfLog...),
			"rocm-smi: inconsistent input: `rocm-smi --showtopo --shownodesbw` lists GPU 0-7 (8) but `rocm-smi` lists GPU 0-3 (4); was one output cut short?", topology.ErrInconsistent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{out: map[string][]byte{"rocm-smi --showtopo --shownodesbw": tc.topo, "rocm-smi": tc.more}}
			_, err := Discover(context.Background(), f.run, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want || !errors.Is(err, tc.sentinel) {
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// Two runs that put one GPU on different PCI buses or NUMA nodes are
// refused, naming both runs.
func TestReportsAgree(t *testing.T) {
	a, b := NewReport(), NewReport()
	a.device(0).PCIBus, b.device(0).PCIBus = "0000:0c:00.0", "0000:22:00.0"
	if err := a.Agree(b, "rocm-smi --showbus", "rocm-smi --showallinfo"); err == nil ||
		err.Error() != "rocm-smi: inconsistent input: GPU[0] is at 0000:0c:00.0 in `rocm-smi --showbus` but at 0000:22:00.0 in `rocm-smi --showallinfo`" {
		t.Errorf("PCI: %v", err)
	}
	b.device(0).PCIBus = ""
	a.device(1).NUMANode, b.device(1).NUMANode = 0, 1
	if err := a.Agree(b, "x", "y"); err == nil || !errors.Is(err, topology.ErrInconsistent) || !strings.Contains(err.Error(), "GPU[1] is on NUMA node 0 in `x` but 1 in `y`") {
		t.Errorf("NUMA: %v", err)
	}
	b.device(1).NUMANode = 0
	if err := a.Agree(b, "x", "y"); err != nil {
		t.Errorf("agreeing reports: %v", err)
	}
}
