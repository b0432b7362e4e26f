package selector

import "time"

// Work is counted in units of about a thousand elementary steps (a link
// looked at); each costly routine charges what it did, so the answer is a
// function of the input alone (issue 25: with a time budget the same
// request gave different choices on a loaded node).

// DefaultWork is the work Select may spend when Request.Work is 0: on
// all-distinct links the slowest search, a ring of 54 of 64 devices,
// takes 62 ms at it, and every real topology in testdata needs at most
// 2,622 units (TestRealTopologiesExactAtDefaultWork; issue 25,
// docs/performance.md).
const DefaultWork = 10000

// DefaultBudget is the wall-clock safety cap when Request.Budget is 0;
// if it ever fires, Choice.CappedBy says "time".
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
