// Package selector picks the best-connected set of N devices of a node.
//
// It is a pure, deterministic function of a finished *topology.Model, a
// Request and a Policy: it runs no program, reads no environment and
// opens no path; ties go to the lowest indices, and the search is bounded
// by counted work (Request.Work), not time. The search is exact (every
// subset up to 16 candidates, a branch-and-bound over classes of
// interchangeable devices beyond) unless a budget runs out; then
// Choice.Exact is false and Choice.Gap is the proven gap.
// docs/placement.md ("Choosing devices") describes the terms and search.
package selector

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// Sentinel errors; errors.Is finds them in the errors Select returns.
var (
	// ErrBadRequest: the request itself is wrong (N < 0, an unknown
	// device index in Devices or Exclude, a nil model).
	ErrBadRequest = errors.New("bad request")
	// ErrUnknownPolicy: PolicyByName got a name it does not know.
	ErrUnknownPolicy = errors.New("unknown policy")
	// ErrUnknownOrder: ParseOrder got a name it does not know.
	ErrUnknownOrder = errors.New("unknown order")
)

// DefaultAlternatives is how many runner-up sets a Choice lists when
// Request.Alternatives is 0.
const DefaultAlternatives = 5

// MaxCandidates is the most candidate devices Select handles.
const MaxCandidates = 256

// Order is the rank order of the chosen devices.
type Order int

const (
	// OrderIndex (the zero value) ranks devices by ascending index.
	OrderIndex Order = iota
	// OrderLinks ranks devices along a widest Hamiltonian path, so that
	// consecutive ranks share the fastest links.
	OrderLinks
)

// orderNames are the Orders' names, indexed by Order.
var orderNames = [...]string{OrderIndex: "index", OrderLinks: "links"}

// String returns the name ParseOrder accepts ("index", "links"), or
// "Order(N)" for a value that is not an Order.
func (o Order) String() string {
	if o >= 0 && int(o) < len(orderNames) {
		return orderNames[o]
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// ParseOrder parses an Order's name ("" is OrderIndex). Any other name
// gives an error wrapping ErrUnknownOrder that lists the valid names.
func ParseOrder(s string) (Order, error) {
	i, err := byName(s, orderNames[:], ErrUnknownOrder)
	return Order(i), err
}

// byName is the index of name (any case, spaces trimmed; "" is 0) in
// names, or an error wrapping unknown that lists them.
func byName(name string, names []string, unknown error) (int, error) {
	s := strings.ToLower(strings.TrimSpace(name))
	if s == "" {
		return 0, nil
	}
	if i := slices.Index(names, s); i >= 0 {
		return i, nil
	}
	return 0, fmt.Errorf("selector: %w %q (valid: %s)", unknown, name, strings.Join(names, ", "))
}

// Request says what to select.
type Request struct {
	// N is the number of devices wanted; 0 means every free candidate.
	N int
	// Devices restricts the candidates to these indices; nil means every
	// device, a non-nil empty list none.
	Devices []int
	// Exclude removes these indices from the candidates.
	Exclude []int
	// AllowBusy makes busy devices (Device.Busy) candidates.
	AllowBusy bool
	// Held lists devices leased by another amdrun job (index -> holder
	// description), always left out.
	Held map[int]string
	// Order is the rank order of Choice.Devices (zero: by index).
	Order Order
	// Work bounds the work Select spends beyond 16 candidates (up to 16
	// every subset is scored whatever Work); zero means DefaultWork.
	// When it runs out Select returns the best set found, Choice.Exact
	// false and Choice.CappedBy "work".
	Work int
	// Budget is a wall-clock safety cap; zero means DefaultBudget. When
	// it fires, Choice.CappedBy is "time" and the answer depends on how
	// far the search got.
	Budget time.Duration
	// Alternatives is how many runner-up sets to report; 0 means
	// DefaultAlternatives and a negative number means none.
	Alternatives int
}

// Choice is the answer of Select.
type Choice struct {
	// Policy is the name of the policy that chose.
	Policy string
	// Devices are the chosen device indices in rank order.
	Devices []int
	// Score is the chosen set's score.
	Score Score
	// Ring is, for the ring policy, the devices in the order of the best
	// ring found (nil for other policies and for N < 3); the score's
	// ring is its weakest link.
	Ring []int
	// Alternatives are the next best sets, best first, each sorted by
	// index (their scores may equal Score). Beyond 16 candidates a set
	// that only swaps interchangeable devices for others is not listed.
	Alternatives []Candidate
	// Naive is the set a naive launcher would take: the first N free
	// candidates by index, with its score.
	Naive *Candidate
	// Exact says the choice is proven best. When false, GapTerm names
	// the first term on which an unsettled set might beat it, Bound the
	// most such a set could have there and Gap |Bound - chosen| / |Bound|.
	Exact   bool
	Gap     float64
	GapTerm string
	Bound   float64
	// CappedBy says which budget stopped the search before it proved its
	// answer: CappedByWork, CappedByTime, or "" when the search ran to
	// its end (an answer then not exact holds an unproven ring).
	CappedBy string
	// Considered counts the sets (enumeration) or search nodes
	// (branch-and-bound) examined.
	Considered int
	// Work is the work the search spent, in the units of Request.Work.
	Work int
}

// Candidate is a set of devices, sorted by index, with its score.
type Candidate struct {
	Devices []int
	Score   Score
}

// NotEnoughError says there are fewer candidates than requested
// (Requested is 0 when every free device was asked for and none is free).
type NotEnoughError struct {
	Requested  int
	Candidates int
	// Free are the candidate devices (free and allowed).
	Free []int
	// Busy are the busy devices left out, with the reason.
	Busy map[int]string
	// Held are the devices held by other jobs, with the holder.
	Held map[int]string
	// Excluded are the devices left out by Exclude or by Devices.
	Excluded []int
}

func (e *NotEnoughError) Error() string {
	var b strings.Builder
	if e.Requested == 0 {
		b.WriteString("selector: no device available")
	} else {
		fmt.Fprintf(&b, "selector: %d devices requested, %d available", e.Requested, e.Candidates)
	}
	var parts []string
	for i, s := range [...]string{topology.JoinInts(e.Free), joinReasons(e.Busy), joinReasons(e.Held), topology.JoinInts(e.Excluded)} {
		if s != "" {
			parts = append(parts, [...]string{"free: ", "busy: ", "held: ", "excluded: "}[i]+s)
		}
	}
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, "; ") + ")")
	}
	if len(e.Busy) > 0 {
		b.WriteString("; busy devices count with --allow-busy")
	}
	return b.String()
}

// joinReasons lists devices with their reasons, devices that share a
// reason grouped: "0-3,5 (leased by ...), 4 (2 process(es))".
func joinReasons(m map[int]string) string {
	byReason := map[string][]int{}
	var order []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		r := m[k]
		if _, ok := byReason[r]; !ok {
			order = append(order, r)
		}
		byReason[r] = append(byReason[r], k)
	}
	s := make([]string, len(order))
	for i, r := range order {
		s[i] = topology.FormatCPUList(byReason[r])
		if r != "" {
			s[i] += " (" + r + ")"
		}
	}
	return strings.Join(s, ", ")
}

// Select chooses N devices of the prepared model under policy p. It
// returns an error wrapping ErrBadRequest for a malformed request (p not
// a Policy constant among them, more than MaxCandidates candidates), a
// *NotEnoughError when fewer than N candidates exist, and otherwise the
// best set, its runner-ups and the naive set.
func (pp *Prepared) Select(req Request, p Policy) (*Choice, error) {
	if ch, ok := pp.settledNaive(req, p); ok {
		return ch, nil
	}
	return pp.selectBy(req, p, rules{})
}

func (pp *Prepared) selectBy(req Request, p Policy, r rules) (*Choice, error) {
	start := time.Now()
	cands, n, err := pp.checkRequest(req, p)
	if err != nil {
		return nil, err
	}
	k, limit, work := searchLimits(req)
	pr := pp.newProblem(cands, p, n, r)
	pr.own = budget{limit: int64(work), deadline: start.Add(limit)}
	res := pr.search(1)
	chosen := res.top[0].mask // the search scores a set before it looks at the clock
	ch := pr.choice(req, &res, firstN(n).list())
	if k > 0 {
		ch.Alternatives = pp.runnerUps(cands, p, n, r, k, chosen, limit, work)
	}
	return ch, nil
}

// runnerUps are the k best sets other than chosen, found by a search of
// their own so that asking for them never changes the choice (issue 35:
// a search keeping k+1 sets prunes differently). Its work is not counted
// in Choice.Work.
func (pp *Prepared) runnerUps(cands []int, p Policy, n int, r rules, k int, chosen bitset, limit time.Duration, work int) []Candidate {
	pr := pp.newProblem(cands, p, n, r)
	pr.own = budget{limit: int64(work), deadline: time.Now().Add(limit)}
	res := pr.search(k + 1)
	out := make([]Candidate, 0, k)
	for _, e := range res.top {
		if e.mask != chosen && len(out) < k {
			out = append(out, Candidate{Devices: pr.global(e.mask.list()), Score: pr.score(e.key)})
		}
	}
	return out
}

// checkRequest refuses a malformed request and returns the candidates
// and the number of devices wanted.
func (pp *Prepared) checkRequest(req Request, p Policy) ([]int, int, error) {
	m := pp.m
	if !p.valid() {
		return nil, 0, fmt.Errorf("selector: %w: unknown policy %d", ErrBadRequest, int(p))
	}
	if m == nil || len(m.Devices) == 0 {
		return nil, 0, fmt.Errorf("selector: %w: empty topology", ErrBadRequest)
	}
	cands, err := candidates(m, req)
	if err != nil {
		return nil, 0, err
	}
	n := cmp.Or(req.N, len(cands))
	if n == 0 || n > len(cands) {
		return nil, 0, notEnough(m, req, n, cands)
	}
	if len(cands) > MaxCandidates {
		return nil, 0, fmt.Errorf("selector: %w: %d candidate devices, at most %d supported (narrow them with --devices or --exclude)", ErrBadRequest, len(cands), MaxCandidates)
	}
	return cands, n, nil
}

// searchLimits are the request's runner-ups, time cap and work budget,
// each its default where the request leaves it zero.
func searchLimits(req Request) (k int, limit time.Duration, work int) {
	k = max(cmp.Or(req.Alternatives, DefaultAlternatives), 0)
	return k, cmp.Or(max(req.Budget, 0), DefaultBudget), cmp.Or(max(req.Work, 0), DefaultWork)
}

// choice is the search's result as Select returns it.
func (pr *problem) choice(req Request, res *result, naive []int) *Choice {
	best := res.top[0]
	local := best.mask.list()
	work := pr.bud.work
	pr.own = budget{limit: unlimitedWork} // not the search: spends nothing of its budget
	ring, hasRing := pr.policy.rules().ring(pr, &best, res, local)
	ch := &Choice{
		Policy:     pr.policy.String(),
		Score:      pr.score(best.key),
		Exact:      res.exact,
		Considered: res.considered,
		Work:       int(work),
	}
	if !res.exact {
		ch.CappedBy = res.capped
		ch.GapTerm, ch.Bound, ch.Gap = pr.gap(best.key, res.bound)
	}
	if hasRing {
		ch.Ring = pr.global(ring)
	}
	if req.Order == OrderLinks {
		ch.Devices = pr.global(pr.pathOrder(local))
	} else {
		ch.Devices = pr.global(local)
	}
	ch.Naive = &Candidate{Devices: pr.global(naive), Score: pr.score(pr.evalSet(naive).key)}
	return ch
}

// reportRing returns the best ring found for the chosen set best (local,
// 3 or more devices) and sets the key's ring to its weakest link. Where
// the set's ring stays unproven, its upper bound joins res's bound, so
// the gap covers it.
func (p *problem) reportRing(best *entry, res *result, local []int) []int {
	lo := best.key[kFirst]
	ring := p.ringOrder(local, lo)
	b := p.cycleBottleneck(ring)
	rr := ringRange{b, max(b, lo, best.ringHi)}
	best.key[kFirst] = rr.lo
	if !rr.exact() {
		open := best.key
		open[kFirst] = rr.hi
		if res.exact || open.cmp(res.bound) > 0 {
			res.bound = open
		}
		res.exact = false
	}
	return ring
}

// gap is Choice's GapTerm, Bound and Gap for the chosen key and the
// bound of what is unsettled.
func (p *problem) gap(chosen, bound key) (term string, b, gap float64) {
	s, u := p.score(chosen), p.score(bound)
	for i, t := range s.Terms {
		if u.Terms[i].Value > t.Value {
			b = u.Terms[i].Natural()
			if b != 0 {
				gap = math.Abs(b-t.Natural()) / math.Abs(b)
			}
			return t.Name, b, gap
		}
	}
	return "", 0, 0
}

// candidates validates the request and returns the candidates, ascending.
func candidates(m *topology.Model, req Request) ([]int, error) {
	nd := len(m.Devices)
	if req.N < 0 {
		return nil, fmt.Errorf("selector: %w: %d devices requested", ErrBadRequest, req.N)
	}
	for i, ds := range [2][]int{req.Devices, req.Exclude} {
		if j := slices.IndexFunc(ds, func(d int) bool { return d < 0 || d >= nd }); j >= 0 {
			what := [2]string{"device %d in the candidate list", "excluded device %d"}[i]
			return nil, fmt.Errorf("selector: %w: "+what+" does not exist (devices 0-%d)", ErrBadRequest, ds[j], nd-1)
		}
	}
	if uint(req.Order) >= uint(len(orderNames)) {
		return nil, fmt.Errorf("selector: %w: unknown order %d", ErrBadRequest, int(req.Order))
	}
	var allowed []bool // nil: every device (no Devices, no Exclude)
	if req.Devices != nil || len(req.Exclude) > 0 {
		allowed = allowedSet(m, req)
	}
	out := make([]int, 0, len(m.Devices))
	for i := range m.Devices {
		if _, held := req.Held[i]; !held && (allowed == nil || allowed[i]) && (!m.Devices[i].Busy || req.AllowBusy) {
			out = append(out, i)
		}
	}
	return out, nil
}

// allowedSet is Devices minus Exclude.
func allowedSet(m *topology.Model, req Request) []bool {
	allowed := slices.Repeat([]bool{req.Devices == nil}, len(m.Devices))
	for _, d := range req.Devices {
		allowed[d] = true
	}
	for _, d := range req.Exclude {
		allowed[d] = false
	}
	return allowed
}

func notEnough(m *topology.Model, req Request, n int, cands []int) *NotEnoughError {
	e := &NotEnoughError{Requested: n, Candidates: len(cands), Free: cands, Busy: map[int]string{}, Held: map[int]string{}}
	allowed := allowedSet(m, req)
	for i := range m.Devices {
		if !allowed[i] {
			e.Excluded = append(e.Excluded, i)
			continue
		}
		if h, held := req.Held[i]; held {
			e.Held[i] = cmp.Or(h, "held by another amdrun job")
		} else if d := &m.Devices[i]; d.Busy && !req.AllowBusy {
			e.Busy[i] = cmp.Or(d.BusyReason, "busy")
		}
	}
	return e
}
