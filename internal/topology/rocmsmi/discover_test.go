package rocmsmi

import (
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

func TestDiscoverMI250(t *testing.T) {
	read := func(names ...string) []byte {
		var b []byte
		for _, n := range names {
			b = append(b, testutil.ReadFile(t, public(t, n))...)
		}
		return b
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

func TestVersion(t *testing.T) {
	f := &fakeRunner{out: map[string][]byte{"rocm-smi --version": []byte("\n\nROCM-SMI version: 3.0.0+03a4530\nROCM-SMI-LIB version: 7.5.0\n")}}
	v, err := Version(context.Background(), f.run)
	if err != nil || v != "3.0.0+03a4530" {
		t.Errorf("Version = %q, %v", v, err)
	}
}
