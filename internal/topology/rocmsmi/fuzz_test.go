package rocmsmi

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
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

func FuzzParseJSON(f *testing.F) {
	seeds(f, ".json")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		check(t, r)
	})
}
