package main_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestDocsShowSlurmScript checks that docs/multinode.md shows
// examples/slurm/allreduce.sbatch byte for byte, so the batch script the
// manual tells people to submit is the one TestRealSlurmTwoNodeGlooAllReduce
// runs under a real Slurm. It needs no Slurm, so it runs in every tier.
func TestDocsShowSlurmScript(t *testing.T) {
	root := testutil.RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "multinode.md"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(filepath.Join(root, "examples", "slurm", "allreduce.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, body) {
		t.Errorf("docs/multinode.md does not show examples/slurm/allreduce.sbatch as it is")
	}
}
