package runcmd

import (
	"os"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/launch"
)

// TestRunOptions: prefixes only where more than one rank reaches the
// console (a rank alone there may get the terminal itself, issue 15);
// amdrun's stdin goes on when it is a file; torchrun gets the log flags
// itself.
func TestRunOptions(t *testing.T) {
	plan := func(n int) *launch.Plan {
		p := &launch.Plan{}
		for i := range n {
			p.Ranks = append(p.Ranks, launch.Rank{Rank: i, LocalRank: i})
		}
		return p
	}
	tee := launch.Streams{All: launch.StdErr}
	tests := []struct {
		name   string
		o      Options
		ranks  int
		prefix bool
	}{
		{"one rank", Options{Launcher: "amdrun"}, 1, false},
		{"four ranks", Options{Launcher: "amdrun"}, 4, true},
		{"--no-prefix", Options{Launcher: "amdrun", NoPrefix: true}, 4, false},
		{"filter to one rank", Options{Launcher: "amdrun", RanksFilter: []int{2}}, 4, false},
		{"filter to two ranks", Options{Launcher: "amdrun", RanksFilter: []int{0, 2}}, 4, true},
		{"filter to a rank not on this node", Options{Launcher: "amdrun", RanksFilter: []int{0, 7}}, 4, false},
		{"torchrun's one process", Options{Launcher: "torchrun", RanksFilter: []int{0, 1}}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			o := tt.o
			o.IO = ios
			o.LogDir, o.Tee = "/l", tee
			ro := runOptions(&o, plan(tt.ranks))
			if ro.Prefix != tt.prefix {
				t.Errorf("Prefix %v, want %v", ro.Prefix, tt.prefix)
			}
			if ro.Stdin != nil {
				t.Errorf("Stdin %v from a buffer", ro.Stdin)
			}
			if tt.o.Launcher == "torchrun" {
				if ro.LogDir != "" || ro.RanksFilter != nil || !ro.Tee.IsZero() {
					t.Errorf("torchrun's options kept: %+v", ro)
				}
			} else if ro.LogDir != "/l" || ro.Tee.String() != "2" {
				t.Errorf("log options lost: %+v", ro)
			}
		})
	}
	ios, _, _, _ := iostreams.Test()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ios.In = f
	if ro := runOptions(&Options{IO: ios, Launcher: "amdrun"}, plan(1)); ro.Stdin != f {
		t.Errorf("Stdin %v, want amdrun's", ro.Stdin)
	}
}
