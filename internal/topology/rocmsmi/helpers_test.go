package rocmsmi

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// public returns the path of a shared real fixture.
func public(t testing.TB, name string) string {
	t.Helper()
	return testutil.Public(t, name)
}

// parseFile parses a fixture with ParseText.
func parseFile(t testing.TB, path string) (*Report, error) {
	t.Helper()
	return ParseText(bytes.NewReader(testutil.ReadFile(t, path)))
}

// mustReport parses fixtures (public names or testdata paths) and merges them.
func mustReport(t testing.TB, paths ...string) *Report {
	t.Helper()
	r := NewReport()
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = public(t, p)
		}
		one, err := parseFile(t, p)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		r.Merge(one)
	}
	return r
}

// mustModel builds the model and returns it with the warnings given.
func mustModel(t testing.TB, r *Report) (*topology.Model, []string) {
	t.Helper()
	var warns []string
	m, err := r.Model(func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatalf("Model: %v", err)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return m, warns
}

func mine(t testing.TB, name string) string {
	t.Helper()
	return testutil.Testdata(t, "rocm-smi", name)
}

// wantLink checks one link's type, directness and bandwidth.
func wantLink(t *testing.T, m *topology.Model, a, b int, typ topology.LinkType, direct bool, min, max int64) {
	t.Helper()
	l := m.Link(a, b)
	if l == nil {
		t.Fatalf("no link %d-%d", a, b)
	}
	if l.Type != typ || l.Direct != direct || l.MinBandwidth != min || l.MaxBandwidth != max {
		t.Errorf("link %d-%d = %s direct=%v %d-%d MB/s, want %s direct=%v %d-%d MB/s",
			a, b, l.Type, l.Direct, l.MinBandwidth, l.MaxBandwidth, typ, direct, min, max)
	}
}

func numaOf(m *topology.Model) []int {
	out := make([]int, m.N())
	for i, d := range m.Devices {
		out[i] = d.NUMANode
	}
	return out
}
