package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// noGPURoot is a sysfs root with this process's CPUs on one NUMA node
// and no GPU: a CPU box, whatever this host is.
func noGPURoot(t *testing.T) string {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	root := t.TempDir()
	node := filepath.Join(root, "sys", "devices", "system", "node", "node0")
	if err := os.MkdirAll(node, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(node, "cpulist"), []byte(topology.FormatCPUList(cpus)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestFirstJobsQuiet: a first job on a CPU box prints nothing but its
// ranks' output; the OMP_NUM_THREADS line comes only for more than one
// Python rank that really runs (as torchrun's), -q silences it, and -q
// never silences an error (issue 31: two warnings on every command).
func TestFirstJobsQuiet(t *testing.T) {
	testutil.EndToEnd(t)
	env := setEnv(setEnv(cleanEnv(t), "PATH", systemPath()), "XDG_CACHE_HOME", t.TempDir())
	root := noGPURoot(t)
	script := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(script, []byte("exit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const omp = "amdrun: warning: OMP_NUM_THREADS is not set: setting it per rank to its share of its CPUs ("
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a prefix; "" means nothing at all
	}{
		{"--no-python", []string{"--nproc-per-node", "2", "--no-python", "--", "true"}, 0, ""},
		{"dry run", []string{"--nproc-per-node", "2", "--dry-run", "--python", "/bin/sh", script}, 0, ""},
		{"one rank", []string{"--nproc-per-node", "1", "--python", "/bin/sh", script}, 0, ""},
		{"two Python ranks", []string{"--nproc-per-node", "2", "--python", "/bin/sh", script}, 0, omp},
		{"two Python ranks, -q", []string{"-q", "--nproc-per-node", "2", "--python", "/bin/sh", script}, 0, ""},
		{"-q keeps errors", []string{"-q", "--devices", "0", "--no-python", "true"}, 1, "amdrun: --devices/--exclude name GPUs: no GPU found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runAmdrun(t, env, append([]string{"--sysfs-root", root}, c.args...)...)
			if r.code != c.code || (c.stderr == "") != (r.stderr == "") || !strings.HasPrefix(r.stderr, c.stderr) || strings.Count(r.stderr, "\n") > 1 {
				t.Errorf("amdrun %q: exit %d, stderr %q; want exit %d and stderr %q", c.args, r.code, r.stderr, c.code, c.stderr)
			}
		})
	}
}

// TestLeaseAdviceWorks plays the degraded mode's advice end to end with
// a throwaway user U and root (issue 31): U's jobs say nothing while U
// alone used the directory; root's first job after says it once this
// boot, later jobs do not, doctor always does; `sudo amdrun lease init`
// (what the line says) adopts the directory, after which no job warns
// and U can no longer remove a lease file.
func TestLeaseAdviceWorks(t *testing.T) {
	s := newShared(t)
	u := testutil.NewUser(t)
	dir := filepath.Join(testutil.SharedDir(t, 0o1777), "amdrun") // like /run/lock/amdrun
	env := s.envFor(dir)
	job := func(who *testutil.User) result {
		t.Helper()
		r, _ := s.run(who, env, 30*time.Second, "--ngpus", "1", "--no-python", "/bin/true")
		if r.code != 0 {
			t.Fatalf("job: exit %d\n%s", r.code, r.stderr)
		}
		return r
	}
	for i := range 2 {
		if r := job(&u); r.stderr != "" {
			t.Errorf("U's job %d, U alone used the directory: stderr %q, want nothing", i+1, r.stderr)
		}
	}
	want := "amdrun: warning: lease directory " + dir + " is not root-prepared (degraded mode: writable by other users, owner " + u.Name
	if r := job(nil); !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "ask root to run 'amdrun lease init'") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("root's first job after U's: stderr %q, want one line %q...", r.stderr, want)
	}
	for _, who := range []*testutil.User{nil, &u} {
		if r := job(who); r.stderr != "" {
			t.Errorf("a later job of this boot: stderr %q, want nothing", r.stderr)
		}
	}
	r, _ := s.run(&u, env, 60*time.Second, "doctor")
	if !strings.Contains(r.stdout, "[WARN] leases") || !strings.Contains(r.stdout, "not root-prepared (degraded mode") {
		t.Errorf("doctor: want the leases WARN line:\n%s", r.stdout)
	}
	r, _ = s.run(nil, s.env, 20*time.Second, "lease", "init", "--lease-dir", dir)
	if adopted := fmt.Sprintf("%s: adopted the directory jobs made in the degraded mode (owner %s (uid %d), mode 1777)", dir, u.Name, u.UID); r.code != 0 || !strings.Contains(r.stdout, adopted) || r.stderr != "" {
		t.Fatalf("sudo amdrun lease init: exit %d, want 0 and %q:\n%s%s", r.code, adopted, r.stdout, r.stderr)
	}
	for _, who := range []*testutil.User{&u, nil} {
		if r := job(who); r.stderr != "" {
			t.Errorf("job after lease init: stderr %q, want nothing", r.stderr)
		}
	}
	if err := sh(u, "rm", "-f", filepath.Join(dir, "gpu0.lock")); err == nil {
		t.Error("U could remove a lease file after lease init")
	}
}

// TestDryRunBindingWithoutLeaseDir: a dry run that binds exclusive or
// core-complex on a node where no job ever made the lease directory
// plans without CPU leases and says nothing of leases (it said "lease: lease directory
// ... does not exist" and exited 1).
func TestDryRunBindingWithoutLeaseDir(t *testing.T) {
	testutil.EndToEnd(t)
	missing := filepath.Join(t.TempDir(), "never-made")
	for _, bind := range []string{"exclusive", "core-complex"} {
		r := runAmdrun(t, cleanEnv(t, "AMDRUN_LEASE_DIR="+missing), "--source", "example", "--ngpus", "2", "--bind", bind,
			"--dry-run", "--no-python", "true")
		if r.code != 0 || strings.Contains(r.stderr, "lease") || !strings.Contains(r.stdout, "Devices:") {
			t.Errorf("--bind %s dry run without a lease directory: exit %d\n%s%s", bind, r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("--bind %s dry run made the lease directory", bind)
		}
	}
}
