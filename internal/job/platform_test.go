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
		Selection: Selection{Ranks: Ranks{GPUs: 4, N: 4}, Policy: selector.Tree, SearchBudget: time.Second},
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

// TestNoNUMANodesQuietUnlessBindAsked: a host that does not tell its
// NUMA nodes (a container without sys/devices/system/node) plans unbound
// ranks quietly by default (it warned on every job); --bind numa there
// says in one line that it cannot bind.
func TestNoNUMANodesQuietUnlessBindAsked(t *testing.T) {
	for _, bind := range []plan.BindMode{"", plan.BindNUMA} {
		var warned []string
		o := &Options{
			Deps: Deps{
				Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer),
				Topology: func(context.Context) (*topology.Model, error) { return discover.Example() },
				Env:      func() []string { return []string{"OMP_NUM_THREADS=1"} },
				HostNUMA: func() ([]topology.NUMANode, error) {
					return nil, errors.New("host: open sys/devices/system/node: no such file or directory")
				},
				Warn:   func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) },
				Leases: func(bool) (*lease.Dir, error) { return nil, fmt.Errorf("lease: %w", lease.ErrNotSupported) },
			},
			Selection: Selection{Ranks: Ranks{GPUs: 1, N: 1}, Policy: selector.Tree, SearchBudget: time.Second},
			Planning:  Planning{Python: "python3", Args: []string{"train.py"}, Bind: bind, Settings: plan.Settings{NNodes: 1, MasterAddr: "127.0.0.1"}},
		}
		if _, err := Preview(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		var numa []string
		for _, w := range warned {
			if strings.Contains(w, "NUMA nodes") {
				numa = append(numa, w)
			}
		}
		if want := 0; bind != "" {
			want = 1
			if len(numa) != want || numa[0] != "bind numa: the host's NUMA nodes are unknown: ranks are not bound" {
				t.Errorf("--bind numa: warnings %q", warned)
			}
		} else if len(numa) != want {
			t.Errorf("default binding: warnings %q, want none about NUMA nodes", warned)
		}
	}
}
