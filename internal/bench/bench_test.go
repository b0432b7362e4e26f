package bench

import (
	"context"
	"fmt"
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// TestMain lets the test binary stand in for the Python probe: with
// FAKE_PROBE set it prints probe lines for FAKE_PROBE_N devices.
func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Role{Env: "FAKE_PROBE", Run: func(mode string, _ []string) int { return fakeProbe(mode) }})
}

// fakeProbe prints what the Python probe would in mode.
func fakeProbe(mode string) int {
	var n int
	fmt.Sscan(os.Getenv("FAKE_PROBE_N"), &n)
	switch mode {
	case "d2d":
		fmt.Printf(`{"kind":"plan","pairs":%d,"devices":%d}`+"\n", n*(n-1), n)
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if a != b {
					fmt.Printf(`{"kind":"d2d","a":%d,"b":%d,"mbps":%d}`+"\n", a, b, 1000*(a+1)+b)
				}
			}
		}
	case "h2d":
		fmt.Printf(`{"kind":"plan","pairs":%d,"devices":%d}`+"\n", n, n)
		for b := 0; b < n; b++ {
			fmt.Printf(`{"kind":"h2d","dev":%d,"mbps":%d}`+"\n", b, 50000+b)
		}
	case "fail":
		fmt.Fprintln(os.Stderr, "Traceback ...\nRuntimeError: CUDA out of memory")
		return 1
	case "garbage":
		fmt.Println("this is not json")
	}
	return 0
}

func fakeStep(t *testing.T, mode string, n, numa int) Step {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Step{Argv: []string{self}, Env: append(os.Environ(), "FAKE_PROBE="+mode, fmt.Sprintf("FAKE_PROBE_N=%d", n)), NUMA: numa, Mode: mode}
}

func model4(t *testing.T) *topology.Model {
	m := &topology.Model{Source: "test", Devices: []topology.Device{{Index: 0}, {Index: 1, RuntimeIndex: 1}, {Index: 2, RuntimeIndex: 2}, {Index: 3, RuntimeIndex: 3}}}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRunStepsCollectsEveryFigure(t *testing.T) {
	testutil.EndToEnd(t)
	r := &Result{Devices: []int{0, 1, 2}}
	var calls []int
	err := RunSteps(context.Background(), []Step{fakeStep(t, "d2d", 3, -1), fakeStep(t, "h2d", 3, 0), fakeStep(t, "h2d", 3, 1)}, r,
		func(done, total int, _ time.Duration) {
			if total != 12 {
				t.Errorf("total %d, want 6 pairs + 2 x 3 host figures", total)
			}
			calls = append(calls, done)
		})
	if err != nil {
		t.Fatal(err)
	}
	if r.D2D[1][2] != 2002 || r.D2D[2][0] != 3000 || r.D2D[0][0] != 0 {
		t.Errorf("d2d = %v", r.D2D)
	}
	if r.H2D[1][2] != 50002 || len(r.H2D) != 2 {
		t.Errorf("h2d = %v", r.H2D)
	}
	if len(calls) == 0 || calls[len(calls)-1] != 12 {
		t.Errorf("progress calls %v, want to end at 12", calls)
	}
}

func TestRunStepsErrors(t *testing.T) {
	testutil.EndToEnd(t)
	for _, tc := range []struct {
		step Step
		want string
	}{
		{fakeStep(t, "fail", 2, -1), "CUDA out of memory"},
		{fakeStep(t, "garbage", 2, -1), "bad output line"},
		{fakeStep(t, "d2d", 3, -1), "torch sees 3 devices, amdrun made 2 visible"},
	} {
		tc.step.Mode = "d2d"
		err := RunSteps(context.Background(), []Step{tc.step}, &Result{Devices: []int{0, 1}}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %v, want one line containing %q", err, tc.want)
		}
	}
	if _, err := exec.LookPath("/nonexistent/python3"); err == nil {
		t.Skip("/nonexistent/python3 exists on this machine: cannot test a missing interpreter")
	}
	err := RunSteps(context.Background(), []Step{{Argv: []string{"/nonexistent/python3"}, Mode: "d2d"}}, &Result{Devices: []int{0}}, nil)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Errorf("missing python: %v", err)
	}
}

func TestCacheRoundTripAndInvalidation(t *testing.T) {
	dir := t.TempDir()
	keys := []string{"0000:0c:00.0", "0000:22:00.0"}
	path := CachePath(dir, "node1", keys)
	if got, err := Load(path, keys); got != nil || err != nil {
		t.Fatalf("no cache yet: %v %v", got, err)
	}
	r := &Result{Host: "node1", Keys: keys, Devices: []int{0, 1}, D2D: [][]float64{{0, 380000}, {385000, 0}}}
	if err := Save(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, keys)
	if err != nil || got == nil || got.D2D[1][0] != 385000 {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	// Another device in the same slot: the measurement is stale.
	other := []string{"0000:0c:00.0", "0000:99:00.0"}
	if got, err := Load(path, other); got != nil || err != nil {
		t.Errorf("changed devices must invalidate the cache: %+v %v", got, err)
	}
	if CachePath(dir, "node1", other) == path {
		t.Error("different devices share a cache path")
	}
	os.WriteFile(path, []byte("{"), 0o644)
	if _, err := Load(path, keys); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("corrupt cache: %v", err)
	}
	// A hand-edited cache with a value of the wrong kind is named by its
	// JSON key, not by Go's field and type names.
	os.WriteFile(path, []byte(`{"keys": "0000:0c:00.0"}`), 0o644)
	if _, err := Load(path, keys); err == nil || !strings.HasSuffix(err.Error(), "keys: a string where an array belongs") || strings.Contains(err.Error(), "Go ") {
		t.Errorf("cache of the wrong shape: %v", err)
	}
	d, err := CacheDir(func(k string) string { return map[string]string{"HOME": "/home/u"}[k] })
	if err != nil || d != filepath.Join("/home/u", ".cache", "amdrun") {
		t.Errorf("CacheDir = %q, %v", d, err)
	}
	d, _ = CacheDir(func(k string) string { return map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}[k] })
	if d != "/x/amdrun" {
		t.Errorf("CacheDir with XDG_CACHE_HOME = %q", d)
	}
}

// TestApplyMeasurementChangesTheChoiceInput: measured figures replace the
// theoretical links (slower direction as min, faster as max).
func TestApplyMeasurement(t *testing.T) {
	m := model4(t)
	r := &Result{Devices: []int{1, 3}, D2D: [][]float64{{0, 9000}, {7000, 0}}}
	if err := Apply(m, r); err != nil {
		t.Fatal(err)
	}
	l := m.Link(1, 3)
	if l.MinBandwidth != 7000 || l.MaxBandwidth != 9000 || !l.Measured || l.Assumed || m.Bandwidth != "measured" {
		t.Errorf("link 1-3 = %+v, bandwidth %q", *l, m.Bandwidth)
	}
	if m.Link(0, 1).Measured {
		t.Error("an unmeasured pair was marked measured")
	}
	if err := Apply(model4(t), &Result{Devices: []int{0, 9}, D2D: [][]float64{{0, 1}, {1, 0}}}); err == nil {
		t.Error("a device outside the model must be refused")
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{`{"kind":"plan","pairs":2,"devices":2}`, `{"kind":"d2d","a":0,"b":1,"mbps":385000.5}`, `{"kind":"h2d","dev":1,"mbps":55000}`, `not json`, `{"kind":"d2d","a":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLine(b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if l.MBps < 0 || l.A < 0 || l.B < 0 || l.Dev < 0 {
			t.Fatalf("accepted negative figures: %+v", l)
		}
	})
}
