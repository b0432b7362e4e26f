package main_test

import (
	"encoding/json"
	"fmt"
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// needTorch skips (or, with AMDRUN_REQUIRE_TORCH=1 as in CI, fails) when
// Debian's python3-torch is not installed.
func needTorch(t *testing.T) string {
	t.Helper()
	py := pythonPath()
	if err := exec.Command(py, "-c", "import torch.distributed").Run(); err != nil {
		if os.Getenv("AMDRUN_REQUIRE_TORCH") == "1" {
			t.Fatalf("%s cannot import torch.distributed (install python3-torch): %v", py, err)
		}
		t.Skipf("skipping: %s has no torch (apt-get install python3-torch)", py)
	}
	return py
}

type rankReport struct {
	Rank        int      `json:"rank"`
	WorldSize   int      `json:"world_size"`
	Sum         float64  `json:"sum"`
	ExpectedSum float64  `json:"expected_sum"`
	LocalRank   int      `json:"local_rank"`
	CUDAVisible string   `json:"cuda_visible_devices"`
	HIPVisible  string   `json:"hip_visible_devices"`
	OMPThreads  string   `json:"omp_num_threads"`
	CPUsAllowed string   `json:"cpus_allowed_list"`
	Argv        []string `json:"argv"`
}

// TestTorchAllReduceThroughAmdrun runs a real gloo all_reduce through
// amdrun on the bundled MI250 topology (the GPUs need not exist for
// gloo) and checks each rank got what --dry-run --json promised.
func TestTorchAllReduceThroughAmdrun(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	script, err := filepath.Abs("../../examples/allreduce_check.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 4} {
		for _, bind := range []string{"exclusive", "none"} {
			t.Run(fmt.Sprintf("N=%d/bind=%s", n, bind), func(t *testing.T) {
				out := t.TempDir()
				env := cleanEnv(t)
				args := []string{"--source", "example", "--ngpus", fmt.Sprint(n), "--bind", bind, "--python", py, script, out}
				plan := dryRun(t, env, args...)
				r := runAmdrun(t, env, args...)
				if r.code != 0 {
					t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
				}
				var got []rankReport
				for rank := 0; rank < n; rank++ {
					b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank%d.json", rank)))
					if err != nil {
						t.Fatalf("rank %d wrote no report: %v\nstderr:\n%s", rank, err, r.stderr)
					}
					var rr rankReport
					if err := json.Unmarshal(b, &rr); err != nil {
						t.Fatal(err)
					}
					got = append(got, rr)
				}
				sort.Slice(got, func(i, j int) bool { return got[i].Rank < got[j].Rank })
				for i, rr := range got {
					want := plan.Ranks[i]
					if rr.WorldSize != n || rr.Sum != rr.ExpectedSum {
						t.Errorf("rank %d: world %d sum %v, want %d and %v", i, rr.WorldSize, rr.Sum, n, rr.ExpectedSum)
					}
					if rr.LocalRank != want.LocalRank {
						t.Errorf("rank %d: LOCAL_RANK %d, dry run promised %d", i, rr.LocalRank, want.LocalRank)
					}
					if rr.CUDAVisible != plan.VisibleDevices || rr.HIPVisible != plan.VisibleDevices {
						t.Errorf("rank %d: CUDA_VISIBLE_DEVICES %q HIP_VISIBLE_DEVICES %q, dry run promised %q", i, rr.CUDAVisible, rr.HIPVisible, plan.VisibleDevices)
					}
					if len(want.CPUs) > 0 {
						if cpus := cpuList(want.CPUs); rr.CPUsAllowed != cpus {
							t.Errorf("rank %d: Cpus_allowed_list %q, dry run promised %q", i, rr.CPUsAllowed, cpus)
						}
						if rr.OMPThreads != fmt.Sprint(len(want.CPUs)) {
							t.Errorf("rank %d: OMP_NUM_THREADS %q, want the %d bound CPUs", i, rr.OMPThreads, len(want.CPUs))
						}
					}
					if len(rr.Argv) != 1 || rr.Argv[0] != out {
						t.Errorf("rank %d: argv %q", i, rr.Argv)
					}
				}
			})
		}
	}
}

// cpuList formats CPUs the way the kernel writes Cpus_allowed_list.
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
