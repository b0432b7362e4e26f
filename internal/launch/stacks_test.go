package launch

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readStackFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "stacks", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseDump(t *testing.T) {
	got := ParseDump(readStackFixture(t, "two_threads.txt"))
	if len(got) != 2 || len(got[0]) != 6 || len(got[1]) != 1 {
		t.Fatalf("threads %v", got)
	}
	want := Frame{File: "/tmp/stk/dump.py", Line: 8, Func: "<module>"}
	if got[1][0] != want {
		t.Errorf("frame %+v, want %+v", got[1][0], want)
	}
	if ParseDump("garbage\n  File \"x\", line y in z\n") != nil {
		t.Error("text that is no dump parsed")
	}
}

// TestMergeStacks: the table of issue 33's cases, from stacks torch 1.13
// ranks wrote through amdrun (a gloo all_reduce three ranks wait in, the
// fourth asleep before it).
func TestMergeStacks(t *testing.T) {
	ar, sl := readStackFixture(t, "allreduce_torch1.13.txt"), readStackFixture(t, "sleep_torch1.13.txt")
	// Another thread id, same stack: the same group.
	ar2 := strings.Replace(ar, "0x00007f761dec6040", "0x00007fffffff0000", 1)
	tests := []struct {
		name      string
		in        []RankStacks
		ranks     [][]int
		odd       []bool
		suspects  []int
		headlines []string
	}{
		{"one asleep", []RankStacks{{0, ar}, {1, ar2}, {2, sl}, {3, ar}},
			[][]int{{0, 1, 3}, {2}}, []bool{false, true}, []int{2}, []string{
				"ranks 0,1,3 (3 of 4): in all_reduce, called at /tmp/stk/stall.py:13",
				"rank 2 (1 of 4) [odd]: in no collective, at /tmp/stk/stall.py:12 in main"}},
		{"all alike", []RankStacks{{0, ar}, {1, ar}}, [][]int{{0, 1}}, []bool{false}, nil,
			[]string{"ranks 0,1 (2 of 2): in all_reduce, called at /tmp/stk/stall.py:13"}},
		{"one silent", []RankStacks{{0, ar}, {1, ar}, {2, ar}, {3, ""}}, [][]int{{0, 1, 2}, {3}}, []bool{false, true}, []int{3},
			[]string{"ranks 0-2 (3 of 4): in all_reduce, called at /tmp/stk/stall.py:13",
				"rank 3 (1 of 4) [odd]: wrote no stacks (not a Python rank, -E/-I/-S, or stopped)"}},
		{"halves", []RankStacks{{0, sl}, {1, ar}, {2, sl}, {3, ar}}, [][]int{{0, 2}, {1, 3}}, []bool{false, false}, []int{0, 2},
			[]string{"ranks 0,2 (2 of 4): in no collective, at /tmp/stk/stall.py:12 in main",
				"ranks 1,3 (2 of 4): in all_reduce, called at /tmp/stk/stall.py:13"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := MergeStacks(tc.in)
			var ranks [][]int
			var odd []bool
			var heads []string
			for _, x := range g {
				ranks, odd, heads = append(ranks, x.Ranks), append(odd, x.Odd), append(heads, x.Headline(len(tc.in)))
			}
			if !reflect.DeepEqual(ranks, tc.ranks) || !reflect.DeepEqual(odd, tc.odd) {
				t.Errorf("groups %v odd %v, want %v %v", ranks, odd, tc.ranks, tc.odd)
			}
			if s := Suspects(g); !reflect.DeepEqual(s, tc.suspects) {
				t.Errorf("suspects %v, want %v", s, tc.suspects)
			}
			if !reflect.DeepEqual(heads, tc.headlines) {
				t.Errorf("headlines\n%q\nwant\n%q", heads, tc.headlines)
			}
		})
	}
}

func TestRankList(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{{[]int{0, 1, 3}, "0,1,3"}, {[]int{0, 1, 2, 3, 7}, "0-3,7"}, {[]int{5}, "5"}, {nil, ""}} {
		if got := RankList(tc.in); got != tc.want {
			t.Errorf("RankList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWriteStacks(t *testing.T) {
	var b strings.Builder
	if err := WriteStacks(&b, MergeStacks([]RankStacks{{0, readStackFixture(t, "two_threads.txt")}})); err != nil {
		t.Fatal(err)
	}
	want := "amdrun: stacks of 1 ranks in 1 group(s), most recent call first\n" +
		"rank 0 (1 of 1): in no collective, at /tmp/stk/dump.py:8 in <module>\n  thread 1 of 2:\n"
	if !strings.HasPrefix(b.String(), want) || !strings.Contains(b.String(), "  thread 2 of 2:\n    File \"/tmp/stk/dump.py\", line 8 in <module>\n") {
		t.Errorf("got\n%s", b.String())
	}
}

func FuzzParseDump(f *testing.F) {
	for _, n := range []string{"two_threads.txt", "allreduce_torch1.13.txt", "sleep_torch1.13.txt"} {
		f.Add(readStackFixture(f, n))
	}
	f.Fuzz(func(t *testing.T, s string) {
		g := MergeStacks([]RankStacks{{0, s}, {1, s}})
		if len(g) != 1 || len(g[0].Ranks) != 2 {
			t.Fatalf("the same dump twice made groups %v", g)
		}
		var b strings.Builder
		_ = WriteStacks(&b, g)
		Suspects(g)
	})
}
