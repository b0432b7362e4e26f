package job

import (
	"os"
	"testing"

	"bytes"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/plan"
)

// TestRunOptions: prefixes only where more than one rank reaches the
// console (a rank alone there may get the terminal itself, issue 15);
// amdrun's stdin goes on when it is a file; torchrun gets the log flags
// itself.
func TestRunOptions(t *testing.T) {
	plan := func(n int, torchrun bool) *Plan {
		p := &plan.Plan{}
		for i := range n {
			p.Ranks = append(p.Ranks, plan.Rank{Rank: i, LocalRank: i})
		}
		return &Plan{Ranks: p, Run: p, Torchrun: torchrun}
	}
	tee := launch.Streams{All: launch.StdErr}
	tests := []struct {
		name     string
		o        Supervision
		torchrun bool
		ranks    int
		prefix   bool
	}{
		{"one rank", Supervision{}, false, 1, false},
		{"four ranks", Supervision{}, false, 4, true},
		{"--no-prefix", Supervision{NoPrefix: true}, false, 4, false},
		{"filter to one rank", Supervision{RanksFilter: []int{2}}, false, 4, false},
		{"filter to two ranks", Supervision{RanksFilter: []int{0, 2}}, false, 4, true},
		{"filter to a rank not on this node", Supervision{RanksFilter: []int{0, 7}}, false, 4, false},
		{"torchrun's one process", Supervision{RanksFilter: []int{0, 1}}, true, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Supervision: tt.o}
			o.Stdin = new(bytes.Buffer)
			o.LogDir, o.Tee = "/l", tee
			ro := runOptions(&o, plan(tt.ranks, tt.torchrun))
			if ro.Prefix != tt.prefix {
				t.Errorf("Prefix %v, want %v", ro.Prefix, tt.prefix)
			}
			if ro.Stdin != nil {
				t.Errorf("Stdin %v from a buffer", ro.Stdin)
			}
			if tt.torchrun {
				if ro.LogDir != "" || ro.RanksFilter != nil || !ro.Tee.IsZero() {
					t.Errorf("torchrun's options kept: %+v", ro)
				}
			} else if ro.LogDir != "/l" || ro.Tee.All != tee.All {
				t.Errorf("log options lost: %+v", ro)
			}
		})
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ro := runOptions(&Options{Deps: Deps{Stdin: f}}, plan(1, false)); ro.Stdin != f {
		t.Errorf("Stdin %v, want amdrun's", ro.Stdin)
	}
}

// TestOMPNote: the OMP_NUM_THREADS line only where amdrun's values reach
// Python ranks that run (issue 31).
func TestOMPNote(t *testing.T) {
	const note = "OMP_NUM_THREADS is not set: ..."
	for _, tt := range []struct {
		name     string
		dryRun   bool
		noPython bool
		launcher string
		want     string
	}{
		{"python ranks", false, false, "amdrun", note},
		{"dry run", true, false, "amdrun", ""},
		{"--no-python", false, true, "amdrun", ""},
		{"torchrun sets its own", false, false, "torchrun", ""},
	} {
		o := &Options{}
		o.NoPython, o.Launcher = tt.noPython, tt.launcher
		if got := ompNote(o, tt.dryRun, note); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
