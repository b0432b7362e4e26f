package launch

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The ranks' Python stacks, merged as LLNL's STAT merges MPI ranks (issue
// 33). Pure; stacks_linux.go asks the ranks.

// ErrNotOwner is AskStacks' refusal of another user's job.
var ErrNotOwner = errors.New("only the job's owner or root can take its stacks")

// Frame is one line of a Python stack.
type Frame struct {
	File string
	Line int
	Func string
}

func (f Frame) String() string { return fmt.Sprintf("File %q, line %d in %s", f.File, f.Line, f.Func) }

// Thread is one thread's frames, most recent call first (no thread id).
type Thread []Frame

// RankStacks is one rank's answer: faulthandler's dump ("": none in time).
type RankStacks struct {
	Rank int
	Dump string
}

// StackGroup is the ranks whose threads are the same.
type StackGroup struct {
	Ranks    []int
	Threads  []Thread // as the first rank of the group wrote them
	Odd      bool     // a group smaller than the biggest one
	NoAnswer bool     // the group of ranks that wrote no stacks
}

// ParseDump reads faulthandler's dump of every thread but the bootstrap's,
// skipping lines it does not know; it never fails.
func ParseDump(dump string) []Thread {
	var out []Thread
	cur := -1
	for _, l := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(l, "Thread 0x"), strings.HasPrefix(l, "Current thread 0x"),
			strings.HasPrefix(l, "Stack (most recent call first)"):
			out = append(out, Thread{})
			cur = len(out) - 1
		case cur >= 0 && strings.HasPrefix(l, "  File \""):
			if f, ok := parseFrame(l[len("  File \""):]); ok {
				out[cur] = append(out[cur], f)
			}
		}
	}
	// Not the thread that took the signal for amdrun.
	return slices.DeleteFunc(out, func(t Thread) bool {
		return slices.ContainsFunc(t, func(f Frame) bool { return f.Func == listenFunc })
	})
}

// listenFunc is the function of stackBootstrap's thread that takes the signal.
const listenFunc = "_amdrun_listen"

// parseFrame reads `PATH", line N in FUNC`.
func parseFrame(s string) (Frame, bool) {
	i := strings.LastIndex(s, "\", line ")
	if i < 0 {
		return Frame{}, false
	}
	rest := s[i+len("\", line "):]
	num, fn, ok := strings.Cut(rest, " in ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return Frame{}, false
	}
	return Frame{File: s[:i], Line: n, Func: fn}, true
}

// key is what two ranks share in one group: their threads, in any order.
func key(ts []Thread) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		var b strings.Builder
		for _, f := range t {
			b.WriteString(f.String())
			b.WriteByte('\n')
		}
		parts[i] = b.String()
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x00")
}

// MergeStacks groups the ranks by their stacks: the biggest group first
// (ties: the lowest rank), the ranks that did not answer last; every group
// smaller than the biggest is Odd.
func MergeStacks(ranks []RankStacks) []StackGroup {
	var groups []StackGroup
	var silent StackGroup
	index := map[string]int{}
	for _, r := range ranks {
		ts := ParseDump(r.Dump)
		if len(ts) == 0 {
			silent.Ranks = append(silent.Ranks, r.Rank)
			continue
		}
		k := key(ts)
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, StackGroup{Threads: ts})
		}
		groups[i].Ranks = append(groups[i].Ranks, r.Rank)
	}
	for i := range groups {
		slices.Sort(groups[i].Ranks)
	}
	slices.SortStableFunc(groups, func(a, b StackGroup) int {
		return cmp.Or(len(b.Ranks)-len(a.Ranks), a.Ranks[0]-b.Ranks[0])
	})
	for i := range groups {
		groups[i].Odd = len(groups[i].Ranks) < len(groups[0].Ranks)
	}
	if len(silent.Ranks) > 0 {
		slices.Sort(silent.Ranks)
		silent.NoAnswer, silent.Odd = true, true
		groups = append(groups, silent)
	}
	return groups
}

// collectives are the torch.distributed calls a rank waits in for peers.
var collectives = strings.Fields(`all_reduce all_gather all_gather_into_tensor all_gather_object
	reduce_scatter reduce_scatter_tensor broadcast broadcast_object_list barrier monitored_barrier
	reduce gather gather_object scatter scatter_object_list all_to_all all_to_all_single
	send recv wait batch_isend_irecv _allgather_base _reduce_scatter_base`)

// Where says where a group's ranks are: the collective they wait in ("":
// none) and the innermost frame outside torch, in the thread that waits,
// else the main one (faulthandler lists it last).
func (g StackGroup) Where() (collective string, at Frame) {
	if len(g.Threads) == 0 {
		return "", Frame{}
	}
	t := g.Threads[len(g.Threads)-1]
	if i := slices.IndexFunc(g.Threads, func(th Thread) bool { c, _ := inCollective(th); return c != "" }); i >= 0 {
		t = g.Threads[i]
	}
	collective, outer := inCollective(t)
	for _, f := range t[outer:] {
		if !strings.Contains(f.File, "/torch/") {
			return collective, f
		}
	}
	if len(t) > 0 {
		return collective, t[0]
	}
	return collective, Frame{}
}

// inCollective is t's outermost collective and the index past it (0: none).
func inCollective(t Thread) (string, int) {
	name, past := "", 0
	for i, f := range t {
		if strings.Contains(f.File, "/torch/distributed/") && slices.Contains(collectives, f.Func) {
			name, past = f.Func, i+1
		}
	}
	return name, past
}

// Suspects are the ranks of the smallest odd groups, those that did not
// answer and those that wait in no collective while others do.
func Suspects(groups []StackGroup) []int {
	var out []int
	smallest, anyWaits := 0, false
	for _, g := range groups {
		if g.Odd && (smallest == 0 || len(g.Ranks) < smallest) {
			smallest = len(g.Ranks)
		}
		c, _ := g.Where()
		anyWaits = anyWaits || c != ""
	}
	for _, g := range groups {
		c, _ := g.Where()
		if (g.Odd && len(g.Ranks) == smallest) || g.NoAnswer || (anyWaits && c == "") {
			out = append(out, g.Ranks...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// RankList writes ranks as "0,1,3" with runs of three or more as "4-7".
func RankList(ranks []int) string {
	var parts []string
	for i := 0; i < len(ranks); i++ {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if j-i >= 2 {
			parts = append(parts, fmt.Sprintf("%d-%d", ranks[i], ranks[j]))
			i = j
		} else {
			parts = append(parts, strconv.Itoa(ranks[i]))
		}
	}
	return strings.Join(parts, ",")
}

// ranksNoun is "rank 2" or "ranks 0,1,3".
func ranksNoun(ranks []int) string {
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	return "ranks " + RankList(ranks)
}

// Headline is one group's line: its ranks, and where they are.
func (g StackGroup) Headline(total int) string {
	h := fmt.Sprintf("%s (%d of %d)", ranksNoun(g.Ranks), len(g.Ranks), total)
	if g.NoAnswer {
		return h + " [odd]: wrote no stacks (not a Python rank, -E/-I/-S, or stopped)"
	}
	if g.Odd {
		h += " [odd]"
	}
	c, at := g.Where()
	switch {
	case c != "":
		return fmt.Sprintf("%s: in %s, called at %s:%d", h, c, at.File, at.Line)
	case at.File != "":
		return fmt.Sprintf("%s: in no collective, at %s:%d in %s", h, at.File, at.Line, at.Func)
	}
	return h + ":"
}

// WriteStacks prints each group's headline and threads, most recent call first.
func WriteStacks(w io.Writer, groups []StackGroup) error {
	total := 0
	for _, g := range groups {
		total += len(g.Ranks)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "amdrun: stacks of %d ranks in %d group(s), most recent call first\n", total, len(groups))
	for _, g := range groups {
		b.WriteString(g.Headline(total) + "\n")
		for i, t := range g.Threads {
			fmt.Fprintf(&b, "  thread %d of %d:\n", i+1, len(g.Threads))
			if len(t) == 0 {
				b.WriteString("    <no Python frame>\n")
			}
			for _, f := range t {
				b.WriteString("    " + f.String() + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
