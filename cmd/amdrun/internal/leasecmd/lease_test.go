package leasecmd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/leasecmd"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

func TestNewCmdLeaseInitFlags(t *testing.T) {
	for _, tt := range []struct {
		name     string
		env      []string
		args     []string
		dir      string
		tmpfiles bool
	}{
		{"default", nil, nil, "/run/lock/amdrun", false},
		{"environment", []string{"AMDRUN_LEASE_DIR=/srv/l"}, nil, "/srv/l", false},
		{"flag wins", []string{"AMDRUN_LEASE_DIR=/srv/l"}, []string{"--lease-dir", "/x"}, "/x", false},
		{"tmpfiles", nil, []string{"--tmpfiles"}, "/run/lock/amdrun", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams()
			f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return tt.env }}
			var got *leasecmd.InitOptions
			cmd := leasecmd.NewCmdLease(f, func(_ context.Context, o *leasecmd.InitOptions) error {
				got = o
				return nil
			})
			cmd.SetArgs(append([]string{"init"}, tt.args...))
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got == nil || got.Dir != tt.dir || got.Tmpfiles != tt.tmpfiles {
				t.Errorf("options %+v, want dir %q tmpfiles %v", got, tt.dir, tt.tmpfiles)
			}
		})
	}
}

func example(context.Context) (*topology.Model, error) { return discover.Example() }

func TestRunInitTmpfiles(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams()
	err := leasecmd.RunInit(context.Background(), &leasecmd.InitOptions{IO: ios, Topology: example, Dir: "/run/lock/amdrun", Tmpfiles: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1+3+8 || !strings.HasPrefix(lines[0], "# ") || lines[1] != "d /run/lock/amdrun 0755 root root -" ||
		lines[len(lines)-1] != "f /run/lock/amdrun/gpu7.lock 0644 root root -" {
		t.Errorf("tmpfiles lines:\n%s", out)
	}
}

func TestRunInit(t *testing.T) {
	testutil.RequireRoot(t)
	ios, _, out, errOut := cmdtest.Streams()
	dir := filepath.Join(t.TempDir(), "leases")
	o := &leasecmd.InitOptions{IO: ios, Topology: example, Dir: dir, HostNUMA: func() ([]topology.NUMANode, error) {
		return []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}, {ID: 1, CPUs: []int{2, 3}}}, nil
	}}
	if err := leasecmd.RunInit(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), dir+" is root-prepared: node lock, queue, 8 device lock files (8 new), 4 CPU lock files (4 new)\n"; got != want || errOut.Len() != 0 {
		t.Errorf("stdout %q stderr %q, want %q", got, errOut, want)
	}
	// A CPU lease file per CPU, for jobs that may not make one there.
	for _, c := range []string{"0", "3"} {
		if _, err := os.Stat(filepath.Join(dir, "cpu:"+c+".lock")); err != nil {
			t.Errorf("no CPU lease file: %v", err)
		}
	}
	// Over a directory every user can write: refused, left as it is.
	other := filepath.Join(t.TempDir(), "group")
	os.Mkdir(other, 0o777)
	syscall.Chmod(other, 0o1777)
	out.Reset()
	o.Dir = other
	err := leasecmd.RunInit(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), other+": unsafe path: a directory owned by root (uid 0), mode 1777, that lease init did not make") || out.Len() != 0 || errOut.Len() != 0 {
		t.Errorf("lease init over a 1777 directory: %v; stdout %q stderr %q", err, out, errOut)
	}
	if ents, _ := os.ReadDir(other); len(ents) != 0 {
		t.Errorf("lease init added %d entries to a directory it refused", len(ents))
	}
}
