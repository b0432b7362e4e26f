package runcmd_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/runcmd"
)

// TestExpandAbbrev: argparse's abbreviations, as torchrun accepts them
// (allow_abbrev), in both spellings; an ambiguous one is a one-line
// usage error naming the candidates.
func TestExpandAbbrev(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // nil: an error
		err  string
	}{
		{args: []string{"--nproc_per_nod", "2", "t.py"}, want: []string{"--nproc-per-node", "2", "t.py"}},
		{args: []string{"--nproc-per", "2", "t.py"}, want: []string{"--nproc-per-node", "2", "t.py"}},
		{args: []string{"--nproc_per_nod=2", "t.py"}, want: []string{"--nproc-per-node=2", "t.py"}},
		{args: []string{"--nnode", "1", "--standal", "t.py"}, want: []string{"--nnodes", "1", "--standalone", "t.py"}},
		{args: []string{"--max_res", "3", "--rdzv_b", "c10d", "t.py"}, want: []string{"--max-restarts", "3", "--rdzv-backend", "c10d", "t.py"}},
		// Exact names are kept as written (pflag normalises _ itself).
		{args: []string{"--nproc_per_node", "2", "--rdzv-id", "j", "t.py"}, want: []string{"--nproc_per_node", "2", "--rdzv-id", "j", "t.py"}},
		// A flag's value is not a flag; shorthands take values too.
		{args: []string{"--log-dir", "--nproc", "t.py"}, want: []string{"--log-dir", "--nproc", "t.py"}},
		{args: []string{"-n", "2", "-r", "3", "--tee", "1", "t.py"}, want: []string{"-n", "2", "-r", "3", "--tee", "1", "t.py"}},
		{args: []string{"-mr3", "--no-pyth", "t.py"}, want: []string{"-mr3", "--no-python", "t.py"}},
		// torchrun's flag wins an abbreviation it shares with amdrun's own
		// (--no-prefix): the line was written for torchrun.
		{args: []string{"--no-p", "prog"}, want: []string{"--no-python", "prog"}},
		{args: []string{"--no-pr", "prog"}, want: []string{"--no-prefix", "prog"}},
		// Everything from SCRIPT on is the script's.
		{args: []string{"t.py", "--nproc", "2"}, want: []string{"t.py", "--nproc", "2"}},
		{args: []string{"--", "--nproc"}, want: []string{"--", "--nproc"}},
		// Not a prefix of any flag: left for cobra to refuse.
		{args: []string{"--frobnicate", "t.py"}, want: []string{"--frobnicate", "t.py"}},
		{args: []string{"--rdzv", "x", "t.py"}, err: "ambiguous option: --rdzv could match --rdzv-backend, --rdzv-conf, --rdzv-endpoint, --rdzv-id"},
		{args: []string{"--mo", "1", "t.py"}, err: "ambiguous option: --mo could match --module, --monitor-interval"},
		{args: []string{"--ma", "1", "t.py"}, err: "ambiguous option: --ma could match --master-addr, --master-port, --max-restarts"},
	} {
		cmd := runcmd.NewCmdRun(newFactory(t), nil)
		got, err := runcmd.ExpandAbbrev(cmd, tc.args)
		if tc.err != "" {
			var fe *cmdutil.FlagError
			if err == nil || err.Error() != tc.err || !errors.As(err, &fe) {
				t.Errorf("%q: error %v, want usage error %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

// TestAbbreviatedLineRuns: an abbreviated line gives the options the full
// one does.
func TestAbbreviatedLineRuns(t *testing.T) {
	f := newFactory(t)
	args, err := runcmd.ExpandAbbrev(runcmd.NewCmdRun(f, nil), []string{"--nproc_per_nod", "2", "--max_rest", "1", "t.py"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := parse(t, f, args...)
	if err != nil || o.Ranks.N != 2 || o.MaxRestarts != 1 {
		t.Fatalf("%q: %+v, %v; want 2 ranks, 1 restart", args, o, err)
	}
}

// TestStaticMultiNodeMasterDefaults: torchrun's --master-port 29500 on
// several nodes; one node keeps a free port; no --master-addr is
// 127.0.0.1, with a warning that every node must be this machine.
func TestStaticMultiNodeMasterDefaults(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		addr, warn string
		port       int
	}{
		{args: []string{"--nnodes", "2", "--node-rank", "1", "--master-addr", "n0", "-n", "1"}, addr: "n0", port: 29500},
		{args: []string{"--nnodes", "2", "--master-addr", "n0", "--master-port", "1234", "-n", "1"}, addr: "n0", port: 1234},
		{args: []string{"--nnodes", "2", "-n", "1"}, addr: "127.0.0.1", port: 29500,
			warn: "--nnodes 2 without --master-addr: the nodes meet at 127.0.0.1:29500, as with torchrun, so every node must run on this machine"},
		{args: []string{"-n", "1"}, addr: "127.0.0.1", port: 0},
	} {
		f := newFactory(t)
		var warned []string
		f.Warn = func(format string, a ...any) { warned = append(warned, fmt.Sprintf(format, a...)) }
		o, err := parse(t, f, append(tc.args, "t.py")...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if o.MasterAddr != tc.addr || o.MasterPort != tc.port {
			t.Errorf("%q: master %s:%d, want %s:%d", tc.args, o.MasterAddr, o.MasterPort, tc.addr, tc.port)
		}
		if w := strings.Join(warned, "|"); w != tc.warn {
			t.Errorf("%q: warnings %q, want %q", tc.args, w, tc.warn)
		}
	}
}
