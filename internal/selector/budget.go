package selector

import "time"

// Work is counted in units of about a thousand elementary steps (a link
// looked at): a set scored by enumeration is one unit, a node of the
// branch-and-bound 1 + nc²/256 (its bound looks at every pair of the nc
// classes a few times), a ring test over k devices 2^(k-1)·k/1024 (the
// subset table), a cycle looked for beyond 16 devices (k² + k per
// rotation)/1024, a min cut k³/1024. Each costly routine charges what it
// did, so a unit costs about the same time on every input. Counting work
// instead of time makes the answer a function of the input alone (issue
// 25: with a time budget the same request gave different choices on a
// loaded node).

// DefaultWork is the work Select may spend when Request.Work is 0. It
// was chosen on the inputs where the search always runs to the budget
// (all-distinct links): at 10,000 units the slowest of them, a ring of
// 54 of 64 devices, took 62 ms wall on a 2-core machine at load 5.7
// (BenchmarkDistinct; 45 ms of CPU time), and the ring of 8-48 of 64 is
// as good as at 60,000 units (issue 25; issue 35 removed the ring's
// local search and exact cycle search, which no real shape used). Every
// real topology in testdata with more than 16 devices needs at most
// 2,622 units (the KFD MI300X CPX ring of 49), so its answer is proven
// inside the budget; up to 16 every subset is scored whatever the work
// (TestRealTopologiesExactAtDefaultWork; docs/performance.md).
const DefaultWork = 10000

// DefaultBudget is the wall-clock safety cap when Request.Budget is 0.
// The work budget ends a search long before it on any machine that is
// not overloaded; if it ever fires, Choice.CappedBy says "time" and the
// answer depends on the load.
const DefaultBudget = 2 * time.Second

// Why a search stopped before it proved its answer (Choice.CappedBy).
const (
	CappedByWork = "work"
	CappedByTime = "time"
)

// budget is the work allowance of one Select and its safety cap.
type budget struct {
	work     int64 // spent
	limit    int64
	deadline time.Time
	polls    int
	capped   string // "", CappedByWork or CappedByTime, once spent
}

// spend adds u units of work.
func (b *budget) spend(u int64) { b.work += u }

// spent says whether the search must stop: the work is used up, or (the
// clock read every 64th call) the safety cap has passed. Once it says
// yes it keeps saying yes.
func (b *budget) spent() bool {
	if b.capped != "" {
		return true
	}
	if b.work >= b.limit {
		b.capped = CappedByWork
		return true
	}
	if b.polls++; b.polls&63 == 0 && !b.deadline.IsZero() && time.Now().After(b.deadline) {
		b.capped = CappedByTime
		return true
	}
	return false
}

// unlimitedWork is the limit of a budget that never runs out.
const unlimitedWork = 1 << 62
