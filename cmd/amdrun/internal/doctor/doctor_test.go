package doctor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/doctor"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

// torch answers the torch probe with out.
func torch(out string, err error) topology.Runner {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return []byte(out), err
	}
}

// contained answers the containment probe with c and err.
func contained(c launch.Containment, err error) func() (launch.Containment, error) {
	return func() (launch.Containment, error) { return c, err }
}

// options are doctor Options on the example model, a healthy root, no
// visible-device variables, an empty lease directory and a torch that
// sees 2 devices; edit changes them.
func options(t *testing.T, edit func(*doctor.Options)) (*doctor.Options, *bytes.Buffer) {
	t.Helper()
	ios, _, out, _ := cmdtest.Streams()
	leaseDir := t.TempDir()
	o := &doctor.Options{
		IO: ios,
		Topology: func(context.Context) (*topology.Model, error) {
			return discover.Example()
		},
		Env: func() []string { return []string{"HOME=/home/u"} },
		Root: testutil.FakeRoot(t, map[string]string{
			"proc/sys/kernel/numa_balancing": "0\n",
			"proc/cmdline":                   "BOOT_IMAGE=/vmlinuz root=/dev/sda1 iommu=pt quiet\n",
		}),
		Leases:      func() (*lease.Dir, error) { return lease.Open(leaseDir, lease.Options{}) },
		Run:         torch("2.11.0 cuda 2\n", nil),
		Python:      "python3",
		Containment: contained(launch.ContainPIDNamespace, nil),
	}
	if edit != nil {
		edit(o)
	}
	return o, out
}

// check returns the check called name, failing the test when missing.
func check(t *testing.T, checks []doctor.Check, name string) doctor.Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return doctor.Check{}
}

func TestChecks(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*doctor.Options)
		check  string
		status doctor.Status
		detail []string // substrings of Detail
		advice []string // substrings of Advice
	}{
		{
			name: "numa balancing on", check: "NUMA balancing", status: doctor.Warn,
			edit: func(o *doctor.Options) {
				o.Root = testutil.FakeRoot(t, map[string]string{"proc/sys/kernel/numa_balancing": "1\n", "proc/cmdline": "iommu=pt"})
			},
			detail: []string{"on (kernel.numa_balancing = 1)"},
			advice: []string{"--numa-balancing off"},
		},
		{
			name: "pid namespace", check: "containment", status: doctor.OK,
			detail: []string{"pid-namespace: each job gets its own PID namespace"},
		},
		{
			name: "subreaper, not root", check: "containment", status: doctor.OK,
			edit: func(o *doctor.Options) {
				o.Containment = contained(launch.ContainSubreaper, errors.New("creating a PID namespace is not permitted (it needs CAP_SYS_ADMIN: run as root)"))
			},
			detail: []string{"subreaper: a guard per rank", "not permitted"},
			advice: []string{"weaker than a namespace", "kills or stops both amdrun and a guard frees that guard's rank, which lives on", "root", "user namespaces"},
		},
		{
			name: "subreaper guards", check: "guards", status: doctor.OK,
			edit: func(o *doctor.Options) {
				o.Containment = contained(launch.ContainSubreaper, errors.New("creating a user namespace is not permitted"))
			},
			detail: []string{"not dumpable", "comes to amdrun, which kills it"},
		},
		{
			name: "user namespace", check: "containment", status: doctor.OK,
			edit: func(o *doctor.Options) {
				o.Containment = contained(launch.ContainUserNamespace, errors.New("creating a PID namespace is not permitted (it needs CAP_SYS_ADMIN: run as root, or let the kernel permit user namespaces)"))
			},
			detail: []string{"user-namespace: each job gets its own user and PID namespace"},
		},
		{
			name: "user namespace guards", check: "guards", status: doctor.OK,
			edit:   func(o *doctor.Options) { o.Containment = contained(launch.ContainUserNamespace, nil) },
			detail: []string{"not dumpable", "comes to the keeper, which kills it", "cannot signal the keeper"},
			advice: []string{"outside the job, can ptrace"},
		},
		{
			name: "user namespace lease", check: "lease hold", status: doctor.OK,
			edit:   func(o *doctor.Options) { o.Containment = contained(launch.ContainUserNamespace, nil) },
			detail: []string{"once the job's namespace is empty"},
		},
		{
			name: "pid namespace lease", check: "lease hold", status: doctor.OK,
			detail: []string{"once the job's namespace is empty"},
		},
		{
			name: "containment unknown", check: "containment", status: doctor.Warn,
			edit:   func(o *doctor.Options) { o.Containment = contained(launch.ContainAuto, launch.ErrNotSupported) },
			detail: []string{"cannot tell", "only supported on Linux"},
		},
		{
			name: "numa balancing off", check: "NUMA balancing", status: doctor.OK,
			detail: []string{"off (kernel.numa_balancing = 0)"},
		},
		{
			name: "numa balancing not supported", check: "NUMA balancing", status: doctor.OK,
			edit:   func(o *doctor.Options) { o.Root = testutil.FakeRoot(t, map[string]string{"proc/cmdline": "iommu=pt"}) },
			detail: []string{"not supported"},
		},
		{
			name: "AMD without iommu=pt", check: "IOMMU", status: doctor.Warn,
			edit: func(o *doctor.Options) {
				o.Root = testutil.FakeRoot(t, map[string]string{"proc/cmdline": "root=/dev/sda1 amd_iommu=on quiet\n"})
			},
			detail: []string{"amd_iommu=on"},
			advice: []string{"iommu=pt"},
		},
		{
			name: "AMD with no iommu option", check: "IOMMU", status: doctor.Warn,
			edit: func(o *doctor.Options) {
				o.Root = testutil.FakeRoot(t, map[string]string{"proc/cmdline": "root=/dev/sda1 quiet\n"})
			},
			detail: []string{"default"},
		},
		{
			name: "AMD with iommu=pt", check: "IOMMU", status: doctor.OK,
			detail: []string{"iommu=pt"},
		},
		{
			name: "NVIDIA without iommu=pt", check: "IOMMU", status: doctor.OK,
			edit: func(o *doctor.Options) {
				o.Root = testutil.FakeRoot(t, map[string]string{"proc/cmdline": "root=/dev/sda1\n"})
				o.Topology = func(context.Context) (*topology.Model, error) {
					m, err := discover.Example()
					if err == nil {
						m.Vendor = topology.VendorNVIDIA
					}
					return m, err
				}
			},
		},
		{
			name: "cmdline unreadable", check: "IOMMU", status: doctor.Warn,
			edit:   func(o *doctor.Options) { o.Root = t.TempDir() },
			detail: []string{"cannot read /proc/cmdline"},
		},
		{
			name: "no visible-device variables", check: "visible devices", status: doctor.OK,
			detail: []string{"no CUDA_/HIP_/ROCR_VISIBLE_DEVICES set"},
		},
		{
			name: "ROCR and HIP both set", check: "visible devices", status: doctor.Warn,
			edit: func(o *doctor.Options) {
				o.Env = func() []string { return []string{"ROCR_VISIBLE_DEVICES=0,1,2,3", "HIP_VISIBLE_DEVICES=1"} }
			},
			detail: []string{"HIP_VISIBLE_DEVICES=1 ROCR_VISIBLE_DEVICES=0,1,2,3"},
			advice: []string{"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "unset one"},
		},
		{
			name: "CUDA only", check: "visible devices", status: doctor.OK,
			edit:   func(o *doctor.Options) { o.Env = func() []string { return []string{"CUDA_VISIBLE_DEVICES=4,5"} } },
			detail: []string{"CUDA_VISIBLE_DEVICES=4,5 (amdrun chooses among these)"},
		},
		{
			name: "torch sees two devices", check: "python + torch", status: doctor.OK,
			detail: []string{"python3: torch 2.11.0 (cuda build) sees 2 device(s)"},
		},
		{
			name: "torch sees none", check: "python + torch", status: doctor.Warn,
			edit:   func(o *doctor.Options) { o.Run = torch("2.11.0 cpu 0\n", nil) },
			detail: []string{"sees 0"},
			advice: []string{"sees no GPU"},
		},
		{
			name: "no torch", check: "python + torch", status: doctor.Warn,
			edit:   func(o *doctor.Options) { o.Run = torch("", errors.New("ModuleNotFoundError: No module named 'torch'")) },
			detail: []string{"python3 cannot import torch (ModuleNotFoundError"},
			advice: []string{"install PyTorch"},
		},
		{
			name: "python given", check: "python + torch", status: doctor.OK,
			edit: func(o *doctor.Options) {
				o.Python = "/opt/py/bin/python"
				o.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
					if name != "/opt/py/bin/python" || len(args) != 2 || args[0] != "-c" {
						return nil, errors.New("wrong interpreter " + name)
					}
					return []byte("2.5.1 hip 8\n"), nil
				}
			},
			detail: []string{"/opt/py/bin/python: torch 2.5.1 (hip build) sees 8 device(s)"},
		},
		{
			name: "topology", check: "topology source", status: doctor.OK,
			detail: []string{"example (seed MI250 node)"},
		},
		{
			name: "no busy devices", check: "devices", status: doctor.OK,
			detail: []string{"8 devices, none busy"},
		},
		{
			name: "a busy device", check: "devices", status: doctor.Warn,
			edit: func(o *doctor.Options) {
				o.Topology = func(context.Context) (*topology.Model, error) {
					m, err := discover.Example()
					if err == nil {
						m.Devices[6].Busy, m.Devices[6].BusyReason = true, "1 process"
					}
					return m, err
				}
			},
			detail: []string{"busy: 6 (1 process)"},
			advice: []string{"--allow-busy"},
		},
		{
			name: "NUMA placement", check: "NUMA placement", status: doctor.OK,
			detail: []string{"node 0: GPU 0,1,2,3; node 1: GPU 4,5,6,7"},
		},
		{
			name: "no leases", check: "leases", status: doctor.OK,
			detail: []string{"no device leased"},
		},
		{
			name: "topology fails", check: "topology source", status: doctor.Fail,
			edit: func(o *doctor.Options) {
				o.Topology = func(context.Context) (*topology.Model, error) {
					return nil, errors.New("no GPU found: sysfs: no KFD nodes")
				}
			},
			detail: []string{"no GPU found"},
			advice: []string{"install amd-smi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _ := options(t, tt.edit)
			c := check(t, doctor.Checks(context.Background(), o), tt.check)
			if c.Status != tt.status {
				t.Errorf("%s: status %s, want %s (%+v)", tt.check, c.Status, tt.status, c)
			}
			for _, w := range tt.detail {
				if !strings.Contains(c.Detail, w) {
					t.Errorf("%s: detail %q lacks %q", tt.check, c.Detail, w)
				}
			}
			for _, w := range tt.advice {
				if !strings.Contains(c.Advice, w) {
					t.Errorf("%s: advice %q lacks %q", tt.check, c.Advice, w)
				}
			}
		})
	}
}

func TestRun(t *testing.T) {
	o, out := options(t, nil)
	if err := doctor.Run(context.Background(), o); err != nil {
		t.Fatalf("healthy node: %v", err)
	}
	for _, want := range []string{
		"[OK  ] topology source        example (seed MI250 node)\n",
		"[OK  ] NUMA balancing         off (kernel.numa_balancing = 0)\n",
		"[OK  ] IOMMU                  iommu=pt\n",
		"[OK  ] containment            pid-namespace: ",
		"[OK  ] python + torch         python3: torch 2.11.0 (cuda build) sees 2 device(s)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Warnings print their advice on the next line and still exit 0.
	o, out = options(t, func(o *doctor.Options) {
		o.Root = testutil.FakeRoot(t, map[string]string{"proc/sys/kernel/numa_balancing": "1", "proc/cmdline": "iommu=pt"})
	})
	if err := doctor.Run(context.Background(), o); err != nil {
		t.Fatalf("warnings only: %v", err)
	}
	if !strings.Contains(out.String(), "[WARN] NUMA balancing         on (kernel.numa_balancing = 1)\n"+
		"                              -> benchmark with it on and off") {
		t.Errorf("warning and advice lines:\n%s", out)
	}
}

func TestRunFail(t *testing.T) {
	o, out := options(t, func(o *doctor.Options) {
		o.Topology = func(context.Context) (*topology.Model, error) {
			return nil, errors.New("no GPU found")
		}
	})
	err := doctor.Run(context.Background(), o)
	if !errors.Is(err, cmdutil.ErrSilent) {
		t.Errorf("failed check: error %v, want cmdutil.ErrSilent", err)
	}
	if !strings.Contains(out.String(), "[FAIL] topology source        no GPU found\n") {
		t.Errorf("output lacks the failed check:\n%s", out)
	}
	// Checks that need the model are left out; the others still run.
	for _, absent := range []string{"] IOMMU ", "] leases ", "] devices ", "] NUMA placement "} {
		if strings.Contains(out.String(), absent) {
			t.Errorf("output has %q without a model:\n%s", absent, out)
		}
	}
	if !strings.Contains(out.String(), "python + torch") {
		t.Errorf("torch check missing:\n%s", out)
	}
}

func TestRunJSON(t *testing.T) {
	for _, fail := range []bool{false, true} {
		o, out := options(t, func(o *doctor.Options) {
			o.JSON = true
			o.Env = func() []string { return []string{"ROCR_VISIBLE_DEVICES=0", "HIP_VISIBLE_DEVICES=0"} }
			if fail {
				o.Topology = func(context.Context) (*topology.Model, error) { return nil, errors.New("boom") }
			}
		})
		err := doctor.Run(context.Background(), o)
		if fail != errors.Is(err, cmdutil.ErrSilent) {
			t.Errorf("fail=%v: error %v", fail, err)
		}
		var got struct {
			Checks []doctor.Check `json:"checks"`
			OK     bool           `json:"ok"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("fail=%v: not JSON: %v\n%s", fail, err, out)
		}
		if got.OK == fail {
			t.Errorf("fail=%v: ok = %v", fail, got.OK)
		}
		want := 11
		if fail {
			want = 7 // topology, visible, balancing, containment (3 lines), torch
		}
		if len(got.Checks) != want {
			t.Errorf("fail=%v: %d checks, want %d: %+v", fail, len(got.Checks), want, got.Checks)
		}
		if c := check(t, got.Checks, "visible devices"); c.Status != doctor.Warn || !strings.Contains(c.Advice, "unset one") {
			t.Errorf("fail=%v: visible devices %+v, want WARN", fail, c)
		}
	}
}

func TestLeaseCheckHeld(t *testing.T) {
	dir := t.TempDir() // this user's, 0700: nobody else can change it
	d, err := lease.Open(dir, lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := d.Acquire([]string{"gpu3"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	o, _ := options(t, func(o *doctor.Options) {
		o.Leases = func() (*lease.Dir, error) { return lease.Open(dir, lease.Options{}) }
	})
	c := check(t, doctor.Checks(context.Background(), o), "leases")
	me, _ := user.Current()
	want := fmt.Sprintf("GPU 3 by %s pid %d", me.Username, os.Getpid())
	if c.Status != doctor.OK || !strings.HasPrefix(c.Detail, dir+" (") || !strings.HasSuffix(c.Detail, ": "+want) {
		t.Errorf("leases: %+v, want OK ending %q", c, want)
	}

	// A lease directory that cannot be used is a warning, not a failure.
	o, _ = options(t, func(o *doctor.Options) {
		o.Leases = func() (*lease.Dir, error) { return nil, errors.New("lease: /run/lock/amdrun: permission denied") }
	})
	c = check(t, doctor.Checks(context.Background(), o), "leases")
	if c.Status != doctor.Warn || !strings.Contains(c.Advice, "--lease-dir") || !strings.Contains(c.Advice, "amdrun lease init") {
		t.Errorf("unusable lease dir: %+v, want WARN with advice naming lease init and --lease-dir", c)
	}
}

// TestLeaseCheckDegraded: a lease directory every user can write is a
// WARN that says what it cannot promise; a bad file at one lease path is
// a WARN naming the device.
func TestLeaseCheckDegraded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "group")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	syscall.Chmod(dir, 0o1777)
	o, _ := options(t, func(o *doctor.Options) {
		o.Leases = func() (*lease.Dir, error) { return lease.Open(dir, lease.Options{}) }
	})
	c := check(t, doctor.Checks(context.Background(), o), "leases")
	if c.Status != doctor.Warn || !strings.Contains(c.Detail, "not root-prepared (degraded mode") ||
		!strings.Contains(c.Detail, "another user can take a device") || !strings.Contains(c.Advice, "amdrun lease init") {
		t.Errorf("shared lease dir: %+v, want WARN saying what it cannot promise", c)
	}

	own := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(own, "gpu5.lock"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _ = options(t, func(o *doctor.Options) {
		o.Leases = func() (*lease.Dir, error) { return lease.Open(own, lease.Options{}) }
	})
	c = check(t, doctor.Checks(context.Background(), o), "leases")
	if c.Status != doctor.Warn || !strings.Contains(c.Detail, "GPU 5 unusable (lease: "+filepath.Join(own, "gpu5.lock")+": unsafe path: a FIFO owned by ") {
		t.Errorf("FIFO at a lease path: %+v", c)
	}

	// Not made yet: a WARN, and doctor does not make it.
	missing := filepath.Join(t.TempDir(), "missing")
	o, _ = options(t, func(o *doctor.Options) {
		o.Leases = func() (*lease.Dir, error) { return lease.Open(missing, lease.Options{}) }
	})
	c = check(t, doctor.Checks(context.Background(), o), "leases")
	if c.Status != doctor.Warn || !strings.Contains(c.Detail, "does not exist yet") {
		t.Errorf("missing lease dir: %+v", c)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("doctor made the lease directory")
	}
}

func TestNewCmdDoctor(t *testing.T) {
	tests := []struct {
		name       string
		env        []string
		sysfsRoot  string
		args       []string
		wantRoot   string
		wantJSON   bool
		wantPython string
	}{
		{name: "defaults", wantRoot: "/", wantPython: "python3"},
		{name: "root from the environment", env: []string{"AMDRUN_SYSFS_ROOT=/captured"}, wantRoot: "/captured", wantPython: "python3"},
		{name: "sysfs-root flag wins", env: []string{"AMDRUN_SYSFS_ROOT=/captured"}, sysfsRoot: "/flag", wantRoot: "/flag", wantPython: "python3"},
		{name: "python from PYTHON_EXEC, the last assignment winning as in exec",
			env:      []string{"PYTHON_EXEC=/first", "AMDRUN_SYSFS_ROOT=/a", "PYTHON_EXEC=/opt/py/bin/python", "AMDRUN_SYSFS_ROOT=/b"},
			wantRoot: "/b", wantPython: "/opt/py/bin/python"},
		{name: "json and python", args: []string{"--json", "--python", "/usr/bin/python3.12"}, wantRoot: "/", wantJSON: true, wantPython: "/usr/bin/python3.12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams()
			f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return tt.env }}
			f.Topo.SysfsRoot = tt.sysfsRoot
			var got *doctor.Options
			cmd := doctor.NewCmdDoctor(f, func(ctx context.Context, o *doctor.Options) error {
				got = o
				return nil
			})
			cmd.SetArgs(tt.args)
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got.Root != tt.wantRoot || got.JSON != tt.wantJSON || got.Python != tt.wantPython || got.Leases == nil {
				t.Errorf("Root %q JSON %v Python %q Leases set %v, want %q %v %q true",
					got.Root, got.JSON, got.Python, got.Leases != nil, tt.wantRoot, tt.wantJSON, tt.wantPython)
			}
		})
	}
}

// TestPathCheck: an executable called amdrun earlier on PATH than the
// running one (optimum-amd's console script) is warned about, with both
// paths; the running one first, or not on PATH, is OK.
func TestPathCheck(t *testing.T) {
	dir := t.TempDir()
	exe := func(p string) string {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho optimum\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	venv := exe(filepath.Join(dir, "venv", "bin", "amdrun"))
	ours := exe(filepath.Join(dir, "go", "bin", "amdrun"))
	notExec := filepath.Join(dir, "noexec", "amdrun")
	exe(notExec)
	if err := os.Chmod(notExec, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		path   string
		status doctor.Status
		detail string
	}{
		{"another amdrun first", filepath.Dir(venv) + ":" + filepath.Dir(ours), doctor.Warn, venv + " comes first on PATH, not this amdrun (" + ours + ")"},
		{"this one first", filepath.Dir(ours) + ":" + filepath.Dir(venv), doctor.OK, ours},
		{"a file that is not executable is skipped", filepath.Dir(notExec) + ":" + filepath.Dir(ours), doctor.OK, ours},
		{"not on PATH", "/nonexistent", doctor.OK, ours + " (not on PATH)"},
	} {
		o, _ := options(t, func(o *doctor.Options) {
			o.Env = func() []string { return []string{"PATH=" + tc.path} }
			o.Self = func() (string, error) { return ours, nil }
		})
		c := check(t, doctor.Checks(context.Background(), o), "amdrun on PATH")
		if c.Status != tc.status || c.Detail != tc.detail {
			t.Errorf("%s: %s %q, want %s %q", tc.name, c.Status, c.Detail, tc.status, tc.detail)
		}
		if tc.status == doctor.Warn && !strings.Contains(c.Advice, "optimum") {
			t.Errorf("%s: advice %q does not name optimum-amd", tc.name, c.Advice)
		}
	}
}

// TestTorchCheckNamesTheRule: the python + torch line says which rule
// chose the interpreter.
func TestTorchCheckNamesTheRule(t *testing.T) {
	o, _ := options(t, func(o *doctor.Options) { o.Python, o.PythonFrom = "/home/u/venv/bin/python", "$VIRTUAL_ENV" })
	c := check(t, doctor.Checks(context.Background(), o), "python + torch")
	if want := "/home/u/venv/bin/python ($VIRTUAL_ENV): torch 2.11.0 (cuda build) sees 2 device(s)"; c.Detail != want {
		t.Errorf("detail %q, want %q", c.Detail, want)
	}
}
