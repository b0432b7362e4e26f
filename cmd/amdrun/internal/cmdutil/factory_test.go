package cmdutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
)

// TestFactoryResolves checks the one resolver every command uses: a flag
// wins, then the environment (its last assignment, as exec reads it),
// then the default.
func TestFactoryResolves(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		env                          []string
		sysfsFlag, leaseFlag, pyFlag string
		sysfs, leaseDir, python      string
		timeout                      time.Duration
	}{
		{name: "defaults", sysfs: "/", leaseDir: "/run/lock/amdrun", python: "python3", timeout: 30 * time.Second},
		{name: "environment",
			env:   []string{"AMDRUN_SYSFS_ROOT=/cap", "AMDRUN_LEASE_DIR=/l", "PYTHON_EXEC=/py", "AMDRUN_TOOL_TIMEOUT=90s"},
			sysfs: "/cap", leaseDir: "/l", python: "/py", timeout: 90 * time.Second},
		{name: "the last assignment wins",
			env:   []string{"PYTHON_EXEC=/a", "AMDRUN_SYSFS_ROOT=/x", "PYTHON_EXEC=/b", "AMDRUN_SYSFS_ROOT=/y", "AMDRUN_TOOL_TIMEOUT=1s", "AMDRUN_TOOL_TIMEOUT=junk"},
			sysfs: "/y", leaseDir: "/run/lock/amdrun", python: "/b", timeout: 30 * time.Second},
		{name: "flags win",
			env:       []string{"AMDRUN_SYSFS_ROOT=/cap", "AMDRUN_LEASE_DIR=/l", "PYTHON_EXEC=/py"},
			sysfsFlag: "/f", leaseFlag: "/fl", pyFlag: "/fp",
			sysfs: "/f", leaseDir: "/fl", python: "/fp", timeout: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Factory{Env: func() []string { return tc.env }}
			f.Topo.SysfsRoot = tc.sysfsFlag
			if got := f.SysfsRoot(); got != tc.sysfs {
				t.Errorf("SysfsRoot %q, want %q", got, tc.sysfs)
			}
			if got := f.LeaseDir(tc.leaseFlag); got != tc.leaseDir {
				t.Errorf("LeaseDir %q, want %q", got, tc.leaseDir)
			}
			if got, _ := f.PythonFrom(tc.pyFlag); got != tc.python {
				t.Errorf("Python %q, want %q", got, tc.python)
			}
			if got := f.ToolTimeout(); got != tc.timeout {
				t.Errorf("ToolTimeout %v, want %v", got, tc.timeout)
			}
		})
	}
}

// TestPythonFrom has one case per step of the interpreter rule and checks
// each step beats the ones after it.
func TestPythonFrom(t *testing.T) {
	all := []string{"PYTHON_EXEC=/opt/py/bin/python3.12", "VIRTUAL_ENV=/home/u/venv", "CONDA_PREFIX=/opt/conda/envs/t"}
	for _, tc := range []struct {
		name       string
		env        []string
		flag       string
		path, from string
	}{
		{"--python beats everything", all, "/usr/bin/python3", "/usr/bin/python3", "--python"},
		{"$PYTHON_EXEC beats the environments", all, "", "/opt/py/bin/python3.12", "$PYTHON_EXEC"},
		{"$VIRTUAL_ENV beats conda", all[1:], "", "/home/u/venv/bin/python", "$VIRTUAL_ENV"},
		{"$CONDA_PREFIX beats python -m amdrun", append(all[2:], "AMDRUN_FROM_PYTHON=/v/bin/python"), "", "/opt/conda/envs/t/bin/python", "$CONDA_PREFIX"},
		{"python -m amdrun beats PATH", []string{"AMDRUN_FROM_PYTHON=/v/bin/python3.11"}, "", "/v/bin/python3.11", "python -m amdrun"},
		{"python3 on PATH last", nil, "", "python3", "PATH"},
		{"empty variables do not count", []string{"PYTHON_EXEC=", "VIRTUAL_ENV=", "CONDA_PREFIX="}, "", "python3", "PATH"},
	} {
		f := &Factory{Env: func() []string { return tc.env }}
		path, from := f.PythonFrom(tc.flag)
		if path != tc.path || from != tc.from {
			t.Errorf("%s: PythonFrom(%q) = %q, %q; want %q, %q", tc.name, tc.flag, path, from, tc.path, tc.from)
		}
		if got, _ := f.PythonFrom(tc.flag); got != tc.path {
			t.Errorf("%s: Python = %q, want %q", tc.name, got, tc.path)
		}
	}
}

// TestWarnfQuiet: -q (IOStreams.Quiet) silences every warning, which
// all go through Warnf (issue 31).
func TestWarnfQuiet(t *testing.T) {
	errOut := &bytes.Buffer{}
	ios := iostreams.New(nil, nil, errOut, false, false)
	Warnf(ios, "one %d\n", 1)
	ios.Quiet = true
	Warnf(ios, "two")
	if got := errOut.String(); got != "amdrun: warning: one 1\n" {
		t.Errorf("stderr %q, want only the first warning", got)
	}
}

// TestInstalledPythonBesideBinary: the wheel's console script, run as
// $VENV/bin/amdrun without the venv activated, runs the venv's python; a
// binary in a directory that is no environment's (/usr/bin, ~/.local/bin)
// leaves the choice to PATH (issue 31).
func TestInstalledPythonBesideBinary(t *testing.T) {
	for _, c := range []struct {
		mark string
		want bool
	}{{"pyvenv.cfg", true}, {"conda-meta", true}, {"", false}} {
		env := t.TempDir()
		bin := filepath.Join(env, "bin")
		os.Mkdir(bin, 0o755)
		for _, f := range []string{"amdrun", "python"} {
			os.WriteFile(filepath.Join(bin, f), nil, 0o755)
		}
		if c.mark != "" {
			os.WriteFile(filepath.Join(env, c.mark), nil, 0o644)
		}
		f := &Factory{Env: func() []string { return nil }, Executable: func() (string, error) { return filepath.Join(bin, "amdrun"), nil }}
		path, from := f.PythonFrom("")
		want, wantFrom := "python3", "PATH"
		if c.want {
			want, wantFrom = filepath.Join(bin, "python"), "beside amdrun, in "+env
		}
		if path != want || from != wantFrom {
			t.Errorf("%q in the binary's parent: PythonFrom = %q, %q; want %q, %q", c.mark, path, from, want, wantFrom)
		}
	}
}
