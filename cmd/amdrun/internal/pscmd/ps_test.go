package pscmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/pscmd"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/printable"
	"github.com/amdrun/amdrun/internal/topology"
)

// exampleModel is the bundled MI250 example with device 2 busy.
func exampleModel(t *testing.T) *topology.Model {
	t.Helper()
	m, err := discover.Example()
	if err != nil {
		t.Fatal(err)
	}
	m.Devices[2].Busy, m.Devices[2].BusyReason = true, "pid 4242 uses 10 GiB"
	m.Devices[2].MemUsedMiB = 10240
	return m
}

func TestRows(t *testing.T) {
	m := exampleModel(t)
	start := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	holder := lease.Holder{PID: 999, User: "alice", Start: start, Command: "amdrun -n 2 train.py"}
	fault := fmt.Errorf("lease: /l/gpu6.lock: %w: a FIFO owned by uid 1001", lease.ErrUnsafe)
	rows := pscmd.Rows(m, map[string]lease.State{"gpu5": {Holder: holder}, "gpu6": {Fault: fault}, "not-a-device": {Holder: lease.Holder{PID: 1}}})
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 8", len(rows))
	}
	tests := []struct {
		device int
		want   pscmd.Row
	}{
		{0, pscmd.Row{Device: 0, Key: "gpu0", State: "free", NUMANode: 0}},
		{2, pscmd.Row{Device: 2, Key: "gpu2", State: "busy", Busy: true, Why: "pid 4242 uses 10 GiB", MemUsed: 10240, NUMANode: 0}},
		{5, pscmd.Row{Device: 5, Key: "gpu5", State: "leased", Holder: &holder, NUMANode: 1}},
		{6, pscmd.Row{Device: 6, Key: "gpu6", State: "unusable", Fault: fault.Error(), NUMANode: 1}},
		{7, pscmd.Row{Device: 7, Key: "gpu7", State: "free", NUMANode: 1}},
	}
	for _, tt := range tests {
		if got := rows[tt.device]; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("row %d\n got %+v\nwant %+v", tt.device, got, tt.want)
		}
	}
	// A busy device that an amdrun job leased is shown as leased.
	rows = pscmd.Rows(m, map[string]lease.State{"gpu2": {Holder: holder}})
	if rows[2].State != "leased" || !rows[2].Busy || rows[2].Holder.PID != 999 {
		t.Errorf("busy and leased device: %+v, want state leased, busy, holder pid 999", rows[2])
	}
}

// holdDevice3 takes the lease on device 3 of m in a new lease directory, as
// a running amdrun job would, and returns the directory.
func holdDevice3(t *testing.T, m *topology.Model) string {
	t.Helper()
	dir := t.TempDir()
	d, err := lease.Open(dir, lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire([]string{m.Devices[3].Key()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release(); d.Close() })
	return dir
}

// self is this test process as ps describes a holder.
func self(t *testing.T) (name, cmd string) {
	t.Helper()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("/proc/self/cmdline")
	return me.Username, printable.String(strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")), 120)
}

// runPs runs `amdrun ps` through its command with args.
func runPs(t *testing.T, m *topology.Model, tty bool, args ...string) string {
	t.Helper()
	ios, _, out, _ := cmdtest.Streams()
	cmdtest.SetStdoutTTY(ios, tty)
	f := &cmdutil.Factory{
		IOStreams: ios,
		Env:       func() []string { return nil },
		Warn:      func(format string, args ...any) { t.Logf("warning: "+format, args...) },
	}
	cmd := pscmd.NewCmdPs(f, func(ctx context.Context, o *pscmd.Options) error {
		o.Topology = func(context.Context) (*topology.Model, error) { return m, nil }
		return pscmd.Run(ctx, o)
	})
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("ps %q: %v", args, err)
	}
	return out.String()
}

func TestRunTTY(t *testing.T) {
	m := exampleModel(t)
	dir := holdDevice3(t, m)
	out := runPs(t, m, true, "--lease-dir", dir)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 9 {
		t.Fatalf("%d lines, want a header and 8 devices:\n%s", len(lines), out)
	}
	if f := strings.Fields(lines[0]); !reflect.DeepEqual(f, []string{"GPU", "KEY", "NUMA", "STATE", "DETAIL"}) {
		t.Errorf("header %q", lines[0])
	}
	user, command := self(t)
	for i, want := range []string{
		1: "gpu1  0     free    -",
		2: "gpu2  0     busy    pid 4242 uses 10 GiB",
		3: fmt.Sprintf("gpu3  0     leased  pid %d, user %s, started ", os.Getpid(), user),
		4: "gpu4  1     free    -",
	} {
		if want == "" {
			continue
		}
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("device %d line %q lacks %q", i, lines[i+1], want)
		}
	}
	if !strings.HasSuffix(lines[4], ": "+command) {
		t.Errorf("device 3 line %q does not end with the holder's command", lines[4])
	}
}

func TestRunPiped(t *testing.T) {
	m := exampleModel(t)
	dir := holdDevice3(t, m)
	out := runPs(t, m, false, "--lease-dir", dir)
	user, command := self(t)
	want := []string{
		"GPU\tKEY\tNUMA\tSTATE\tDETAIL",
		"0\tgpu0\t0\tfree\t-",
		"1\tgpu1\t0\tfree\t-",
		"2\tgpu2\t0\tbusy\tpid 4242 uses 10 GiB",
		"", // this process's lease: below
		"4\tgpu4\t1\tfree\t-",
		"5\tgpu5\t1\tfree\t-",
		"6\tgpu6\t1\tfree\t-",
		"7\tgpu7\t1\tfree\t-",
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("piped output:\n%s", out)
	}
	for i := range want {
		if i != 4 && got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
	// Who holds it, as the kernel says: this test process.
	prefix := fmt.Sprintf("3\tgpu3\t0\tleased\tpid %d, user %s, started ", os.Getpid(), user)
	if !strings.HasPrefix(got[4], prefix) || !strings.HasSuffix(got[4], ": "+strings.Join(strings.Fields(command), " ")) {
		t.Errorf("line 4: %q, want %q...: %s", got[4], prefix, command)
	}
}

func TestRunJSON(t *testing.T) {
	m := exampleModel(t)
	dir := holdDevice3(t, m)
	out := runPs(t, m, true, "--json", "--lease-dir", dir)
	var got struct {
		Source   string      `json:"source"`
		LeaseDir string      `json:"lease_dir"`
		Devices  []pscmd.Row `json:"devices"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if got.Source != m.Source || got.LeaseDir != dir || len(got.Devices) != 8 {
		t.Fatalf("source %q lease_dir %q %d devices, want %q %q 8", got.Source, got.LeaseDir, len(got.Devices), m.Source, dir)
	}
	for i, r := range got.Devices {
		want := "free"
		switch i {
		case 2:
			want = "busy"
		case 3:
			want = "leased"
		}
		if r.State != want || r.Device != i || r.Key != fmt.Sprintf("gpu%d", i) {
			t.Errorf("device %d: %+v, want state %s", i, r, want)
		}
	}
	h := got.Devices[3].Holder
	b, _ := os.ReadFile("/proc/self/cmdline")
	command := printable.String(strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")), 200)
	if h == nil || h.PID != os.Getpid() || h.UID != os.Getuid() || h.Command != command {
		t.Errorf("device 3 holder %+v, want this process (pid %d) with its command", h, os.Getpid())
	}
	if got.Devices[2].Why != "pid 4242 uses 10 GiB" || got.Devices[2].MemUsed != 10240 {
		t.Errorf("device 2: %+v, want its busy reason and memory", got.Devices[2])
	}
}

func TestRunLeaseDirFromEnv(t *testing.T) {
	m := exampleModel(t)
	dir := holdDevice3(t, m)
	ios, _, out, _ := cmdtest.Streams()
	f := &cmdutil.Factory{IOStreams: ios, Env: func() []string { return []string{"AMDRUN_LEASE_DIR=" + dir} }}
	cmd := pscmd.NewCmdPs(f, func(ctx context.Context, o *pscmd.Options) error {
		o.Topology = func(context.Context) (*topology.Model, error) { return m, nil }
		return pscmd.Run(ctx, o)
	})
	cmd.SetArgs(nil)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "3\tgpu3\t0\tleased\t") {
		t.Errorf("AMDRUN_LEASE_DIR not used:\n%s", out)
	}
}

func TestRunErrors(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams()
	m := exampleModel(t)
	notDir := t.TempDir() + "/file"
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := pscmd.Run(context.Background(), &pscmd.Options{
		IO:       ios,
		Topology: func(context.Context) (*topology.Model, error) { return m, nil },
		Leases:   func() (*lease.Dir, error) { return lease.Open(notDir, lease.Options{}) },
	})
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("lease dir is a file: error %v, want one saying it is not a directory", err)
	}
	boom := fmt.Errorf("rocm-smi: exit status 2")
	err = pscmd.Run(context.Background(), &pscmd.Options{
		IO:       ios,
		Topology: func(context.Context) (*topology.Model, error) { return nil, boom },
		Leases:   func() (*lease.Dir, error) { t.Error("leases opened after discovery failed"); return nil, nil },
	})
	if err != boom {
		t.Errorf("discovery failure: error %v, want %v", err, boom)
	}
}

// TestRunNoGPU: on a machine without a GPU (auto-detection found none)
// ps says so in one line and succeeds; a named source that fails is an
// error.
func TestRunNoGPU(t *testing.T) {
	noGPU := fmt.Errorf("%w (sysfs: no GPU node)", discover.ErrNoGPU)
	dir := t.TempDir()
	for _, asJSON := range []bool{false, true} {
		ios, _, out, _ := cmdtest.Streams()
		err := pscmd.Run(context.Background(), &pscmd.Options{
			IO: ios, SourceAuto: true, JSON: asJSON,
			Topology: func(context.Context) (*topology.Model, error) { return nil, noGPU },
			Leases:   func() (*lease.Dir, error) { return lease.Open(dir, lease.Options{}) },
		})
		if err != nil {
			t.Fatalf("json %v: %v", asJSON, err)
		}
		if asJSON {
			var got struct{ Devices []pscmd.Row }
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Devices == nil || len(got.Devices) != 0 {
				t.Errorf("JSON %q (%v): want an empty device list", out, err)
			}
			continue
		}
		if out.String() != "no GPU found (sysfs: no GPU node)\n" {
			t.Errorf("output %q, want one line saying there is no GPU", out)
		}
	}
	// CPU ranks lease CPUs on a machine without a GPU too: ps shows them.
	d, err := lease.Open(dir, lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	held, err := d.AcquireCPUs([]int{3, 4, 6})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	for _, asJSON := range []bool{false, true} {
		ios, _, out, _ := cmdtest.Streams()
		err = pscmd.Run(context.Background(), &pscmd.Options{
			IO: ios, SourceAuto: true, JSON: asJSON,
			Topology: func(context.Context) (*topology.Model, error) { return nil, noGPU },
			Leases:   func() (*lease.Dir, error) { return lease.Open(dir, lease.Options{}) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if asJSON {
			var got struct {
				CPUs []lease.CPUHolding `json:"cpus"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.CPUs) != 1 || fmt.Sprint(got.CPUs[0].CPUs) != "[3 4 6]" || got.CPUs[0].Holder.PID != os.Getpid() {
				t.Errorf("JSON %s (%v): want CPUs 3,4,6 held by pid %d", out, err, os.Getpid())
			}
			continue
		}
		want := fmt.Sprintf("no GPU found (sysfs: no GPU node)\nCPUS\tSTATE\tDETAIL\n3-4,6\tleased\tpid %d, ", os.Getpid())
		if !strings.HasPrefix(out.String(), want) || strings.Count(out.String(), "\n") != 3 {
			t.Errorf("output %q, want it to start %q and have 3 lines", out, want)
		}
	}
	ios, _, _, _ := cmdtest.Streams()
	err = pscmd.Run(context.Background(), &pscmd.Options{
		IO:       ios,
		Topology: func(context.Context) (*topology.Model, error) { return nil, noGPU },
	})
	if err != noGPU {
		t.Errorf("named source: error %v, want %v", err, noGPU)
	}
}
