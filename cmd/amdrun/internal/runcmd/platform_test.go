package runcmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/launch/lease"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// TestOtherSystemsPlanButDoNotLaunch is what macOS gets (launch.Supported
// false, leases ErrNotSupported): a dry run from a saved topology works,
// a launch is refused with one line before anything is touched.
func TestOtherSystemsPlanButDoNotLaunch(t *testing.T) {
	defer func(b bool) { canLaunch = b }(canLaunch)
	canLaunch = false
	newOpts := func() *Options {
		ios, _, _, _ := iostreams.Test()
		return &Options{
			IO:         ios,
			Topology:   func(context.Context) (*topology.Model, error) { return discover.Example() },
			Env:        func() []string { return nil },
			Executable: func() (string, error) { return "", errors.New("must not be called") },
			HostNUMA:   func() ([]topology.NUMANode, error) { return nil, nil },
			Now:        time.Now,
			Leases:     func() (*lease.Dir, error) { return nil, fmt.Errorf("lease: %w", lease.ErrNotSupported) },
			NGPUs:      4, Policy: selector.Tree, Python: "python3", Args: []string{"train.py"},
			NNodes: 1, MasterAddr: "127.0.0.1",
		}
	}
	o := newOpts()
	o.DryRun = true
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if out := o.IO.Out.(interface{ String() string }).String(); !strings.Contains(out, "Devices:  0,1,6,7") {
		t.Errorf("dry run printed %q", out)
	}
	o = newOpts()
	err := Run(context.Background(), o)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "needs Linux") {
		t.Errorf("launch: %v, want one line saying it needs Linux", err)
	}
}
