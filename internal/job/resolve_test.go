package job

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// resolved are Options after Resolve of a command line with the
// command's defaults and the flags given sets (give), in the
// environment env, and the warnings Resolve printed.
func resolved(t *testing.T, env []string, given func(l *CommandLine)) (*Options, []string, error) {
	t.Helper()
	l := &CommandLine{}
	for a, d := range map[*Arg]string{&l.NNodes: "1", &l.Grace: "10s", &l.RestartWait: "30s", &l.StallTimeout: "auto"} {
		a.Wrap("default", (*text)(&d), Own)
	}
	given(l)
	var warned []string
	o := &Options{}
	o.Launcher, o.SearchWork, o.SearchBudget = "amdrun", 1, time.Second
	o.Env = func() []string { return env }
	o.Warn = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
	err := o.Resolve(context.Background(), l)
	return o, warned, err
}

// TestResolveReadsFields: Resolve reads each flag from its field of
// CommandLine: torchrun's --shutdown-timeout is the grace, --wait is
// parsed, --nnodes 1:1 is one node, a static
// endpoint is the master, --rdzv-id the run id, and an error names the
// PET_* variable a value came from.
func TestResolveReadsFields(t *testing.T) {
	o, warned, err := resolved(t, nil, func(l *CommandLine) {
		give(&l.ShutdownTimeout, "shutdown-timeout", "3")
		give(&l.Wait, "wait", "2m")
		give(&l.NNodes, "nnodes", "1:1")
		give(&l.RdzvEndpoint, "rdzv-endpoint", "h0:1234")
		give(&l.RdzvID, "rdzv-id", "job7")
		give(&l.LocalAddr, "local-addr", "h1")
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Grace != 3*time.Second || o.Wait != 2*time.Minute || o.NNodes != 1 ||
		o.MasterAddr != "h0" || o.MasterPort != 1234 || o.RunID != "job7" {
		t.Errorf("Resolve: grace %v wait %v nnodes %d master %s:%d run id %q", o.Grace, o.Wait, o.NNodes, o.MasterAddr, o.MasterPort, o.RunID)
	}
	if len(warned) != 1 || warned[0][:12] != "--local-addr" {
		t.Errorf("warned %q, want one line on --local-addr", warned)
	}
	_, _, err = resolved(t, nil, func(l *CommandLine) {
		give(&l.NNodes, "nnodes", "two")
		l.NNodes.From("PET_NNODES")
	})
	if err == nil || err.Error() != `PET_NNODES: want a number of nodes, got "two"` {
		t.Errorf("PET_NNODES=two: %v", err)
	}
}
