package rocmsmi

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

var update = flag.Bool("update", false, "rewrite testdata/rocm-smi/*.golden")

// TestGolden compares the model built from each hand-made fixture with its
// .golden JSON; go test -update rewrites them.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(testutil.Testdata(t, "rocm-smi", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m, _ := mustModel(t, mustReport(t, path))
			var got bytes.Buffer
			if err := topology.WriteJSON(&got, m); err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(path, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := testutil.ReadFile(t, golden)
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("model differs from %s (go test -update rewrites it):\n%s", filepath.Base(golden), got.String())
			}
		})
	}
}
