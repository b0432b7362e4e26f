package launch

import (
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/plan"
)

func TestLocalShimArgs(t *testing.T) {
	p := &plan.Plan{Ranks: []plan.Rank{{CPUs: []int{0, 1}, Mems: []int{0}, MemPolicy: plan.MemPreferred}, {CPUs: []int{2}}, {}}}
	want := []string{"--local-cpus", "0-1/2/", "--local-mems", "0//", "--mempolicy", "preferred"}
	if got := LocalShimArgs(p); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := LocalShimArgs(&plan.Plan{Ranks: []plan.Rank{{}, {}}}); got != nil {
		t.Errorf("unbound plan: %q, want nil", got)
	}
}

// TestPickLocalRank: the shim binds the LOCAL_RANK-th lists; a missing,
// bad or out-of-range LOCAL_RANK is an error, never the wrong binding.
func TestPickLocalRank(t *testing.T) {
	args := []string{"--local-cpus", "0-3/4-7/", "--local-mems", "0/1/", "--mempolicy", "bind", "--", "w"}
	for _, tt := range []struct {
		lr         string
		set        bool
		cpus, mems []int
		err        string
	}{
		{"0", true, []int{0, 1, 2, 3}, []int{0}, ""},
		{"1", true, []int{4, 5, 6, 7}, []int{1}, ""},
		{"2", true, nil, nil, ""},
		{"3", true, nil, nil, `LOCAL_RANK "3" is not one of the 3 local ranks`},
		{"-1", true, nil, nil, `LOCAL_RANK "-1" is not one of the 3 local ranks`},
		{"x", true, nil, nil, `LOCAL_RANK "x" is not one of`},
		{"", false, nil, nil, "LOCAL_RANK is not set"},
	} {
		sa, err := parseShimArgs(args)
		if err != nil {
			t.Fatal(err)
		}
		err = pickLocalRank(sa, tt.lr, tt.set)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("LOCAL_RANK %q: error %v, want %q", tt.lr, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(sa.cpus, tt.cpus) || !reflect.DeepEqual(sa.mems, tt.mems) || sa.policy != plan.MemBind {
			t.Errorf("LOCAL_RANK %s: cpus %v mems %v policy %s, %v; want %v %v bind", tt.lr, sa.cpus, sa.mems, sa.policy, err, tt.cpus, tt.mems)
		}
	}
	// Without per-rank lists LOCAL_RANK plays no part.
	sa, _ := parseShimArgs([]string{"--cpus", "1", "--", "w"})
	if err := pickLocalRank(sa, "", false); err != nil || !reflect.DeepEqual(sa.cpus, []int{1}) {
		t.Errorf("plain shim: %v %v", sa.cpus, err)
	}
	if _, err := parseShimArgs([]string{"--local-cpus", "0-3/x", "--", "w"}); err == nil || !strings.Contains(err.Error(), "local rank 1") {
		t.Errorf("bad list: %v", err)
	}
}

// FuzzParseLocalLists: whatever parses gives back its text.
func FuzzParseLocalLists(f *testing.F) {
	for _, s := range []string{"0-3/4-7", "0//1", "", "1,3-5/x", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		lists, err := parseLocalLists(v)
		if err != nil {
			return
		}
		if len(lists) != strings.Count(v, localSep)+1 {
			t.Errorf("%q: %d lists", v, len(lists))
		}
	})
}
