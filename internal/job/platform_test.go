package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"bytes"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// TestOtherSystemsPlanButDoNotLaunch is what macOS gets (launch.Supported
// false, leases ErrNotSupported): a dry run from a saved topology works,
// a launch is refused with one line before anything is touched.
func TestOtherSystemsPlanButDoNotLaunch(t *testing.T) {
	defer func(b bool) { canLaunch = b }(canLaunch)
	canLaunch = false
	var out bytes.Buffer
	o := &Options{
		Deps: Deps{
			Stdout: &out, Stderr: &out,
			Topology:   func(context.Context) (*topology.Model, error) { return discover.Example() },
			Env:        func() []string { return nil },
			Executable: func() (string, error) { return "", errors.New("must not be called") },
			HostNUMA:   func() ([]topology.NUMANode, error) { return nil, nil },
			Warn:       func(format string, args ...any) { t.Logf(format, args...) },
			Leases:     func(bool) (*lease.Dir, error) { return nil, fmt.Errorf("lease: %w", lease.ErrNotSupported) },
		},
		Selection: Selection{NGPUs: 4, Policy: selector.Tree, SearchBudget: time.Second},
		Planning:  Planning{Python: "python3", Args: []string{"train.py"}, Settings: plan.Settings{NNodes: 1, MasterAddr: "127.0.0.1"}},
	}
	p, err := Preview(context.Background(), o)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	p.WriteText(&out, false)
	if !strings.Contains(out.String(), "Devices:  0,1,6,7") {
		t.Errorf("dry run printed %q", out.String())
	}
	_, err = Run(context.Background(), o)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "needs Linux") {
		t.Errorf("launch: %v, want one line saying it needs Linux", err)
	}
}
