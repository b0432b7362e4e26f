package selector

import (
	"fmt"
	"sort"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

type policyKind int

const (
	kindTree policyKind = iota
	kindRing
)

// Policy ranks device sets. Implementations are unexported; get one from
// NewTreePolicy, NewRingPolicy or PolicyByName.
type Policy interface {
	// Name is the policy's name as PolicyByName accepts it.
	Name() string
	// Score scores a set of devices of a finished model the way Select
	// ranks it (duplicates and out-of-range indices are ignored).
	Score(m *topology.Model, devices []int) Score
	kind() policyKind
}

type treePolicy struct{}

// NewTreePolicy returns the default policy: maximise the bottleneck of the
// widest spanning tree of the set, then the total pairwise bandwidth, then
// use the fewest NUMA nodes, the fewest busy devices, the least load
// (utilisation plus memory use), then the lowest indices.
func NewTreePolicy() Policy { return treePolicy{} }

func (treePolicy) Name() string     { return "tree" }
func (treePolicy) kind() policyKind { return kindTree }
func (treePolicy) Score(m *topology.Model, devices []int) Score {
	return scoreDevices(m, devices, kindTree)
}

type ringPolicy struct{}

// NewRingPolicy returns the ring policy: maximise the bottleneck of the
// best ring (Hamiltonian cycle) through the set, then the set's global
// min cut, then the same tie-breaks as the tree policy.
func NewRingPolicy() Policy { return ringPolicy{} }

func (ringPolicy) Name() string     { return "ring" }
func (ringPolicy) kind() policyKind { return kindRing }
func (ringPolicy) Score(m *topology.Model, devices []int) Score {
	return scoreDevices(m, devices, kindRing)
}

// PolicyNames lists the names PolicyByName accepts, default first.
var PolicyNames = []string{"tree", "ring"}

// PolicyByName returns the policy called name ("tree" or "ring"; "" is
// tree). Any other name gives an error wrapping ErrUnknownPolicy that
// lists the valid names.
func PolicyByName(name string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "tree", "":
		return NewTreePolicy(), nil
	case "ring":
		return NewRingPolicy(), nil
	}
	return nil, fmt.Errorf("selector: %w %q (valid: %s)", ErrUnknownPolicy, name, strings.Join(PolicyNames, ", "))
}

func scoreDevices(m *topology.Model, devices []int, k policyKind) Score {
	seen := map[int]bool{}
	var idx []int
	for _, d := range devices {
		if d >= 0 && d < len(m.Devices) && !seen[d] {
			seen[d] = true
			idx = append(idx, d)
		}
	}
	sort.Ints(idx)
	if len(idx) == 0 || len(idx) > MaxCandidates {
		return Score{}
	}
	pr := newProblem(m, idx, k, len(idx))
	var mask uint64
	for i := range idx {
		mask |= 1 << uint(i)
	}
	return pr.score(pr.evalMask(mask))
}
