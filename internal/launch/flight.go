package launch

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Torch's flight recorder, read for the user after a stall or a watchdog
// timeout (issue 33). Pure; flight_linux.go runs the reader.

// frReader prints one JSON line per dump named in argv (NAME=FD).
//
//go:embed frreader.py
var frReader string

// FREntry is one collective a rank's recorder kept.
type FREntry struct {
	PG    string    `json:"pg"`
	PGID  string    `json:"pg_id"`
	Desc  string    `json:"desc"`
	Seq   int       `json:"seq"`
	P2P   bool      `json:"p2p"`
	Op    string    `json:"op"`
	State string    `json:"state"`
	In    [][]int64 `json:"in"`
	Out   [][]int64 `json:"out"`
}

// FRDump is one rank's dump as frReader printed it.
type FRDump struct {
	Rank    int              `json:"-"`
	File    string           `json:"file"`
	Error   string           `json:"error"`
	Entries []FREntry        `json:"entries"`
	PGs     map[string][]int `json:"pgs"`
	// Completed is each process group's last completed collective, by id
	// (gloo's entries stay "scheduled" when they complete).
	Completed map[string]int `json:"completed"`
}

// FRParse reads frReader's lines, skipping unreadable ones; rankOf names a
// dump file's rank (false: not one amdrun asked for).
func FRParse(out string, rankOf func(file string) (int, bool)) []FRDump {
	var ds []FRDump
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var d FRDump
		var ok bool
		if json.Unmarshal(sc.Bytes(), &d) == nil {
			if d.Rank, ok = rankOf(d.File); ok {
				ds = append(ds, d)
			}
		}
	}
	slices.SortFunc(ds, func(a, b FRDump) int { return a.Rank - b.Rank })
	return ds
}

// frPos is a rank's last collective entered and completed in a group.
type frPos struct{ entered, completed *FREntry }

// FRSummary is the paragraph for dumps of a job of ranks: per process
// group, where the furthest ranks are and where those behind stopped; ""
// when there is nothing to say.
func FRSummary(dumps []FRDump, ranks []int) string {
	var parts, bad []string
	seen := map[int]bool{}
	pos := map[string]map[int]frPos{}
	for _, d := range dumps {
		seen[d.Rank] = true
		if d.Error != "" {
			bad = append(bad, fmt.Sprintf("rank %d's dump could not be read (%s)", d.Rank, d.Error))
			continue
		}
		for i := range d.Entries {
			e := &d.Entries[i]
			if e.P2P {
				continue
			}
			if pos[e.PG] == nil {
				pos[e.PG] = map[int]frPos{}
			}
			p := pos[e.PG][d.Rank]
			if p.entered == nil || e.Seq > p.entered.Seq {
				p.entered = e
			}
			c, known := d.Completed[e.PGID]
			if (e.State == "completed" || known && e.Seq <= c) && (p.completed == nil || e.Seq > p.completed.Seq) {
				p.completed = e
			}
			pos[e.PG][d.Rank] = p
		}
	}
	for _, pg := range slices.Sorted(maps.Keys(pos)) {
		parts = append(parts, frGroup(pg, pos[pg], members(dumps, pg), len(ranks)))
	}
	if len(pos) == 0 {
		return strings.Join(bad, "; ")
	}
	parts = append(parts, bad...)
	if missing := slices.DeleteFunc(slices.Clone(ranks), func(r int) bool { return seen[r] }); len(missing) > 0 {
		parts = append(parts, ranksNoun(missing)+" wrote no dump")
	}
	return "torch's flight recorder: " + strings.Join(parts, "; ") + "."
}

// members are the ranks of process group pg that dumped.
func members(dumps []FRDump, pg string) []int {
	var out []int
	for _, d := range dumps {
		if d.Error != "" {
			continue
		}
		in := slices.ContainsFunc(d.Entries, func(e FREntry) bool { return e.PG == pg && !e.P2P })
		if r, ok := d.PGs[pg]; ok {
			in = slices.Contains(r, d.Rank)
		}
		if in {
			out = append(out, d.Rank)
		}
	}
	return out
}

// frGroup says where the ranks of one process group are, of total ranks.
func frGroup(pg string, pos map[int]frPos, ranks []int, total int) string {
	front := -1
	for _, p := range pos {
		if p.entered != nil {
			front = max(front, p.entered.Seq)
		}
	}
	var ahead []int
	behind := map[int][]int{} // by the last seq entered (-1: none)
	var at *FREntry
	for _, r := range ranks {
		p := pos[r]
		switch {
		case p.entered != nil && p.entered.Seq == front:
			ahead, at = append(ahead, r), p.entered
		case p.entered != nil:
			behind[p.entered.Seq] = append(behind[p.entered.Seq], r)
		default:
			behind[-1] = append(behind[-1], r)
		}
	}
	name := "process group " + pg
	if at != nil && at.Desc != "" {
		name += " (" + at.Desc + ")"
	}
	if at == nil {
		return name + ": no collective recorded"
	}
	done := !slices.ContainsFunc(ahead, func(r int) bool { return pos[r].completed == nil || pos[r].completed.Seq != front })
	var b strings.Builder
	switch {
	case done && len(behind) == 0 && len(ahead) == total:
		fmt.Fprintf(&b, "%s: every rank completed %s last", name, frOp(at))
	case done:
		fmt.Fprintf(&b, "%s: %s completed %s last", name, ranksNoun(ahead), frOp(at))
	default:
		verb := "wait"
		if len(ahead) == 1 {
			verb = "waits"
		}
		fmt.Fprintf(&b, "%s: %s %s in %s", name, ranksNoun(ahead), verb, frOp(at))
		if c := pos[ahead[0]].completed; c != nil {
			fmt.Fprintf(&b, ", after %s", frOp(c))
		}
	}
	for _, seq := range slices.Backward(slices.Sorted(maps.Keys(behind))) {
		rs := behind[seq]
		fmt.Fprintf(&b, "; %s never entered #%d", ranksNoun(rs), front)
		if e := pos[rs[0]].entered; e != nil {
			state := e.State
			if c := pos[rs[0]].completed; c != nil && c.Seq == e.Seq {
				state = "completed"
			}
			fmt.Fprintf(&b, ": last entered %s, %s", frOp(e), state)
		}
	}
	return b.String()
}

// frOp is "gloo:all_reduce #2 (sizes [[4]])".
func frOp(e *FREntry) string {
	s := fmt.Sprintf("%s #%d", e.Op, e.Seq)
	if len(e.In) > 0 {
		s += fmt.Sprintf(" (sizes %v)", e.In)
	}
	return s
}

// frFileName matches fr.ATTEMPT.RANK, and the bootstrap's .tmp.
var frFileName = regexp.MustCompile(`^fr\.([0-9]+)\.([0-9]+)(\.tmp)?$`)

func frRankOf(file string) (int, bool) {
	m := frFileName.FindStringSubmatch(file)
	if m == nil || m[3] != "" {
		return 0, false
	}
	r, err := strconv.Atoi(m[2])
	return r, err == nil
}
