package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestVenvPythonByDefault: with a virtual environment active
// ($VIRTUAL_ENV set) and no --python, a 2-rank gloo job runs the
// environment's interpreter, not the python3 first on PATH (issue 22:
// a pyenv shim without torch made the first job of a new user fail). The
// venv sees Debian's torch through --system-site-packages; PATH is left
// as it was, so the python3 found there (on this machine one without
// torch) is not the venv's.
func TestVenvPythonByDefault(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--system-site-packages", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv (python3-venv): %v\n%s", err, out)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "w.py")
	if err := os.WriteFile(script, []byte(`import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
open(os.path.join(sys.argv[1], "exe%s" % os.environ["RANK"]), "w").write("%s %s %d" % (sys.executable, sys.prefix, int(t.item())))
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := cleanEnv(t, "VIRTUAL_ENV="+venv)
	dry := runAmdrun(t, env, "--source", "example", "--ngpus", "2", "--dry-run", script, dir)
	if want := "Python:   " + filepath.Join(venv, "bin", "python") + " ($VIRTUAL_ENV): torch "; !strings.Contains(dry.stdout, want) {
		t.Errorf("dry run does not name the venv's interpreter and its torch (%q):\n%s", want, dry.stdout)
	}
	r := runAmdrun(t, env, "--source", "example", "--ngpus", "2", script, dir)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, rank := range []string{"0", "1"} {
		b, err := os.ReadFile(filepath.Join(dir, "exe"+rank))
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(venv, "bin", "python") + " " + venv + " 2"
		if string(b) != want {
			t.Errorf("rank %s ran %q, want %q (the venv's interpreter, all_reduce of 2 ranks)", rank, b, want)
		}
	}
}
