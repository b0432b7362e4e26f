package selector

import (
	"slices"

	"github.com/amdrun/amdrun/internal/topology"
)

// The one-shot forms the tests call (amdrun itself prepares the model
// once and calls Prepared.Select): each weighs the model's pairs afresh.

// Select is Prepare(m).Select(req, p).
func Select(m *topology.Model, req Request, p Policy) (*Choice, error) {
	return Prepare(m).Select(req, p)
}

func selectBy(m *topology.Model, req Request, p Policy, r rules) (*Choice, error) {
	return Prepare(m).selectBy(req, p, r)
}

func newProblem(m *topology.Model, cands []int, pol Policy, size int, r rules) *problem {
	return Prepare(m).newProblem(cands, pol, size, r)
}

// Score scores a set of devices of a finished model the way
// Select(m, req, p) ranks it: its split is its bandwidth to req's other
// candidates. Duplicates and out-of-range indices are ignored; an empty
// set, a malformed request or more than MaxCandidates devices in all
// score the empty Score.
func (p Policy) Score(m *topology.Model, req Request, devices []int) Score {
	if !p.valid() || m == nil {
		return Score{}
	}
	chosen := map[int]bool{}
	for _, d := range devices {
		if d >= 0 && d < len(m.Devices) {
			chosen[d] = true
		}
	}
	cands, err := candidates(m, req)
	if err != nil || len(chosen) == 0 {
		return Score{}
	}
	all := slices.Clone(cands)
	for d := range chosen {
		if !slices.Contains(cands, d) {
			all = append(all, d)
		}
	}
	slices.Sort(all)
	if len(all) > MaxCandidates {
		return Score{}
	}
	var set []int
	for i, d := range all {
		if chosen[d] {
			set = append(set, i)
		}
	}
	pr := newProblem(m, all, p, len(set), rules{})
	return pr.score(pr.evalSet(set).key)
}
