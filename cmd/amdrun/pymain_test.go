package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestPythonDashMUserScheme: the wheel's package and binary laid out as
// `pip install --user` leaves them (PYTHONUSERBASE): `python -m amdrun`
// finds the binary in the user scheme's scripts directory, and the ranks'
// default interpreter is that python, by the rule "python -m amdrun"
// (issue 31: it said "the wheel's binary is missing").
func TestPythonDashMUserScheme(t *testing.T) {
	testutil.EndToEnd(t)
	py := pythonPath()
	base := t.TempDir()
	env := setEnv(cleanEnv(t), "PYTHONUSERBASE", base)
	out, err := exec.Command("env", "-i", "PYTHONUSERBASE="+base, py, "-c",
		"import sysconfig; print(sysconfig.get_path('purelib', 'posix_user')); print(sysconfig.get_path('scripts', 'posix_user'))").Output()
	if err != nil {
		t.Skipf("%s cannot say its user scheme: %v", py, err)
	}
	paths := strings.Fields(string(out))
	site, scripts := paths[0], paths[1]
	pkg := filepath.Join(site, "amdrun")
	for _, d := range []string{pkg, scripts} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"__init__.py", "__main__.py"} {
		b, err := os.ReadFile(filepath.Join("../../packaging/wheel/amdrun", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(pkg, f), b, 0o644)
	}
	b, err := os.ReadFile(amdrunBin)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(scripts, "amdrun"), b, 0o755)
	cmd := exec.Command(py, "-m", "amdrun", "--source", "example", "--ngpus", "1", "--dry-run", "train.py")
	cmd.Env, cmd.Dir = env, t.TempDir()
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m amdrun from the user scheme: %v\n%s", err, got)
	}
	if want := "Python:   " + py + " (python -m amdrun)"; !strings.Contains(string(got), want) {
		t.Errorf("dry run lacks %q:\n%s", want, got)
	}
}
