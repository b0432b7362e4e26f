package discover

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/rocmsmi"
)

var update = flag.Bool("update", false, "rewrite the bundled example from testdata")

// TestExampleIsSeedMI250 keeps the bundled example equal to what the
// rocm-smi parser makes of the seed document's MI250 outputs (concise,
// --shownodesbw, --showtoponuma); -update rewrites it.
func TestExampleIsSeedMI250(t *testing.T) {
	f, err := os.Open(testutil.Testdata(t, "rocm-smi", "mi250-seed-collapsed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := rocmsmi.ParseText(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rep.Model(nil)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := topology.WriteJSON(&want, m); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("example/mi250.json", want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(want.Bytes(), exampleJSON) && !*update {
		t.Fatal("example/mi250.json is stale: run go test ./internal/discover -run TestExampleIsSeedMI250 -update")
	}
	ex, err := Example()
	if err != nil && !*update {
		t.Fatal(err)
	}
	if ex != nil {
		if l := ex.Link(0, 1); l.MaxBandwidth != 200000 {
			t.Errorf("example 0-1 = %d MB/s, want 200000", l.MaxBandwidth)
		}
		if ex.Devices[4].NUMANode != 1 || ex.Devices[3].NUMANode != 0 {
			t.Errorf("example NUMA nodes wrong")
		}
	}
}
