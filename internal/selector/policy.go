package selector

import (
	"fmt"
)

// Policy says which bandwidth terms rank a set of devices first; the
// tie-breaks after them are the same for every policy. The zero value is
// Tree. Select refuses values other than the constants below.
type Policy int

const (
	// Tree maximises the bottleneck of the widest spanning tree of the
	// set (the slowest link the group cannot avoid), then the total
	// pairwise bandwidth.
	Tree Policy = iota
	// Ring maximises the bottleneck of the best ring (Hamiltonian cycle)
	// through the set, then its global min cut, then the total pairwise
	// bandwidth (issue 16: a DGX-1 cube mesh's equal rings and cuts).
	Ring
)

// PolicyNames lists the names PolicyByName accepts, default first, in
// the order of the Policy constants (the names of the table policies).
var PolicyNames = policyNames()

// String is the policy's name as PolicyByName accepts it ("tree",
// "ring"), or "Policy(N)" for a value that is not a policy.
func (p Policy) String() string {
	if p.valid() {
		return p.rules().name
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

func (p Policy) valid() bool { return p >= 0 && int(p) < len(policies) }

// PolicyByName returns the policy called name ("tree" or "ring"; "" is
// tree). Any other name gives an error wrapping ErrUnknownPolicy that
// lists the valid names.
func PolicyByName(name string) (Policy, error) {
	i, err := byName(name, policyNames(), ErrUnknownPolicy)
	return Policy(i), err
}
