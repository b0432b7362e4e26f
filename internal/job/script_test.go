package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// A SCRIPT that is not there stops Run before anything is discovered,
// leased or started, in one line (issue 31: every rank used to start and
// fail, with advice to pick another interpreter); a dry run plans it
// (the plan may be for another node); a module or a program is found by its own rules.
func TestMissingScript(t *testing.T) {
	dir := t.TempDir()
	there := filepath.Join(dir, "train.py")
	if err := os.WriteFile(there, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.py")
	tests := []struct {
		name string
		p    Planning
		want string
	}{
		{"missing script", Planning{Args: []string{missing, "--lr", "1"}}, missing},
		{"script in a missing directory", Planning{Args: []string{filepath.Join(dir, "no", "x.py")}}, filepath.Join(dir, "no", "x.py")},
		{"script there", Planning{Args: []string{there}}, ""},
		{"directory (python runs its __main__.py)", Planning{Args: []string{dir}}, ""},
		{"module", Planning{Args: []string{"missing_module"}, Module: true}, ""},
		{"program", Planning{Args: []string{missing}, NoPython: true}, ""},
		{"no command (a preview)", Planning{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &Options{Planning: tt.p}
			if got := o.MissingScript(); got != tt.want {
				t.Errorf("MissingScript() = %q, want %q", got, tt.want)
			}
		})
	}

	probed := errors.New("discovery ran")
	var warned []string
	o := &Options{Planning: Planning{Args: []string{missing}}}
	o.Topology = func(context.Context) (*topology.Model, error) { return nil, probed }
	o.Env = func() []string { return nil }
	o.Warn = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
	if canLaunch {
		_, err := Run(context.Background(), o)
		if !errors.Is(err, ErrNoScript) || err.Error() != missing+": no such file" {
			t.Errorf("Run: %v, want %q before discovery", err, missing+": no such file")
		}
	}
	if _, err := Preview(context.Background(), o); !errors.Is(err, probed) {
		t.Errorf("Preview: %v, want it to go on to discovery (a plan may be for another node)", err)
	}
	if len(warned) != 0 {
		t.Errorf("Preview warned %q, want nothing", warned)
	}
}
