package selector

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSelectMI250Seed(t *testing.T) {
	m := newMI250Node(t)
	tests := []struct {
		size   int
		want   []int
		bneck  float64
		firstA []int // first alternative
	}{
		{1, []int{0}, 0, []int{1}},
		{2, []int{0, 1}, 200000, []int{2, 3}},
		{3, []int{0, 1, 6}, 100000, []int{0, 6, 7}},
		{4, []int{0, 1, 6, 7}, 100000, []int{2, 3, 4, 5}},
		{8, []int{0, 1, 2, 3, 4, 5, 6, 7}, 50000, nil},
	}
	for _, tt := range tests {
		ch, err := Select(m, Request{N: tt.size}, Tree)
		if err != nil {
			t.Fatalf("N=%d: %v", tt.size, err)
		}
		if !slices.Equal(ch.Devices, tt.want) {
			t.Errorf("N=%d: devices %v, want %v (score %s)", tt.size, ch.Devices, tt.want, ch.Score)
		}
		if !ch.Exact || ch.Policy != "tree" {
			t.Errorf("N=%d: exact %v policy %q", tt.size, ch.Exact, ch.Policy)
		}
		if tt.size >= 2 {
			if b, _ := ch.Score.Term("bottleneck"); b.Value != tt.bneck {
				t.Errorf("N=%d: bottleneck %v, want %v", tt.size, b.Value, tt.bneck)
			}
		}
		if tt.firstA == nil {
			if len(ch.Alternatives) != 0 {
				t.Errorf("N=%d: alternatives %v, want none", tt.size, ch.Alternatives)
			}
			continue
		}
		if len(ch.Alternatives) == 0 || !slices.Equal(ch.Alternatives[0].Devices, tt.firstA) {
			t.Errorf("N=%d: first alternative %v, want %v", tt.size, ch.Alternatives, tt.firstA)
		}
	}
}

func TestSelectMI250N4Alternatives(t *testing.T) {
	m := newMI250Node(t)
	ch, err := Select(m, Request{N: 4}, Tree)
	if err != nil {
		t.Fatal(err)
	}
	if got := ch.Score.String(); got != "bottleneck 100000 MB/s, total 548000 MB/s, locality 19, numa 2 nodes, busy 0 devices, split 38, load 0 %" {
		t.Errorf("score %q", got)
	}
	if len(ch.Alternatives) != 5 {
		t.Fatalf("%d alternatives, want 5", len(ch.Alternatives))
	}
	alt := ch.Alternatives[0]
	if !slices.Equal(alt.Devices, []int{2, 3, 4, 5}) || alt.Score.Compare(ch.Score) != 0 {
		t.Errorf("first alternative %v %s, want 2,3,4,5 with an equal score", alt.Devices, alt.Score)
	}
	// the runner-ups after the two 100000 sets fall to 50000
	if b, _ := ch.Alternatives[1].Score.Term("bottleneck"); b.Value != 50000 {
		t.Errorf("second alternative %v %s", ch.Alternatives[1].Devices, ch.Alternatives[1].Score)
	}
	for i := 1; i < len(ch.Alternatives); i++ {
		if ch.Alternatives[i].Score.Compare(ch.Alternatives[i-1].Score) > 0 {
			t.Errorf("alternatives not best first at %d", i)
		}
	}
	if ch.Naive == nil || !slices.Equal(ch.Naive.Devices, []int{0, 1, 2, 3}) {
		t.Fatalf("naive %v", ch.Naive)
	}
	if b, _ := ch.Naive.Score.Term("bottleneck"); b.Value != 50000 {
		t.Errorf("naive score %s", ch.Naive.Score)
	}
}

func TestSelectRingMI250(t *testing.T) {
	m := newMI250Node(t)
	ch, err := Select(m, Request{N: 4}, Ring)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Devices, []int{0, 1, 2, 3}) {
		t.Fatalf("ring N=4: %v (%s), want 0,1,2,3", ch.Devices, ch.Score)
	}
	if !slices.Equal(ch.Ring, []int{0, 1, 3, 2}) {
		t.Errorf("ring order %v, want 0,1,3,2", ch.Ring)
	}
	if r, _ := ch.Score.Term("ring"); r.Value != 50000 {
		t.Errorf("ring bottleneck %v, want 50000", r.Value)
	}
	if c, _ := ch.Score.Term("mincut"); c.Value != 2*50000+2*32000 {
		// {0,1} vs {2,3}: 0-2 and 1-3 at 50000, 0-3 and 1-2 over the host
		t.Errorf("mincut %v", c.Value)
	}
	// 0,1,6,7 needs a host hop across NUMA nodes (SYS) in any ring.
	s := Ring.Score(m, Request{}, []int{0, 1, 6, 7})
	if r, _ := s.Term("ring"); r.Value != 16000 {
		t.Errorf("ring of 0,1,6,7: %s", s)
	}
	ch2, err := Select(m, Request{N: 2}, Ring)
	if err != nil || !slices.Equal(ch2.Devices, []int{0, 1}) || ch2.Ring != nil {
		t.Errorf("ring N=2: %v %v %v", ch2, err, ch2.Ring)
	}
}

func TestSelectBusyAndHeld(t *testing.T) {
	busy := newMI250Node(t, 0)
	tests := []struct {
		name string
		req  Request
		want []int
	}{
		{"busy 0 skipped", Request{N: 1}, []int{1}},
		{"busy 0 allowed ranks last", Request{N: 1, AllowBusy: true}, []int{1}},
		{"busy 0 pair", Request{N: 2}, []int{2, 3}},
		{"held", Request{N: 2, Held: map[int]string{2: "job 7"}}, []int{4, 5}},
		{"exclude", Request{N: 2, Exclude: []int{2, 4}}, []int{6, 7}},
		{"restricted", Request{N: 2, Devices: []int{5, 3, 1}}, []int{1, 3}},
		{"nil restricts nothing", Request{N: 2, Devices: nil}, []int{2, 3}},
		{"all free", Request{}, []int{1, 2, 3, 4, 5, 6, 7}},
	}
	for _, tt := range tests {
		ch, err := Select(busy, tt.req, Tree)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !slices.Equal(ch.Devices, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, ch.Devices, tt.want)
		}
	}
	idle := newMI250Node(t)
	ch, err := Select(idle, Request{N: 1}, Tree)
	if err != nil || !slices.Equal(ch.Devices, []int{0}) {
		t.Errorf("N=1 idle: %v %v", ch, err)
	}
	// Allowed busy device used only when needed: with 1 held, 0 busy is
	// still 0's partner only if allowed.
	ch, err = Select(busy, Request{N: 8, AllowBusy: true}, Tree)
	if err != nil || len(ch.Devices) != 8 {
		t.Fatalf("N=8 allow busy: %v %v", ch, err)
	}
	if b, _ := ch.Score.Term("busy"); b.Natural() != 1 {
		t.Errorf("busy term %v", b)
	}
}

func TestSelectErrors(t *testing.T) {
	m := newMI250Node(t, 3)
	held := map[int]string{5: "amdrun job 4242 (alice)"}
	_, err := Select(m, Request{N: 7, Held: held, Exclude: []int{7}}, Tree)
	var ne *NotEnoughError
	if !errors.As(err, &ne) {
		t.Fatalf("N=7: %v, want NotEnoughError", err)
	}
	if ne.Requested != 7 || ne.Candidates != 5 || !slices.Equal(ne.Free, []int{0, 1, 2, 4, 6}) ||
		ne.Busy[3] != "1 process(es)" || ne.Held[5] != held[5] || !slices.Equal(ne.Excluded, []int{7}) {
		t.Errorf("NotEnoughError %+v", ne)
	}
	want := "selector: 7 devices requested, 5 available (free: 0,1,2,4,6; busy: 3 (1 process(es)); held: 5 (amdrun job 4242 (alice)); excluded: 7); busy devices count with --allow-busy"
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	bad := []struct {
		name string
		req  Request
		is   error
		msg  string
	}{
		{"negative", Request{N: -1}, ErrBadRequest, "selector: bad request: -1 devices requested"},
		{"unknown device", Request{N: 1, Devices: []int{9}}, ErrBadRequest, "device 9 in the candidate list does not exist (devices 0-7)"},
		{"unknown exclude", Request{N: 1, Exclude: []int{-2}}, ErrBadRequest, "excluded device -2 does not exist"},
	}
	for _, tt := range bad {
		_, err := Select(m, tt.req, Tree)
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	_, err = PolicyByName("fastest")
	if !errors.Is(err, ErrUnknownPolicy) || err.Error() != `selector: unknown policy "fastest" (valid: tree, ring)` {
		t.Errorf("PolicyByName: %v", err)
	}
	for _, name := range []string{"tree", "ring"} {
		if p, err := PolicyByName(name); err != nil || p.String() != name {
			t.Errorf("PolicyByName(%q): %v %v", name, p, err)
		}
	}
	if _, err := ParseOrder("random"); !errors.Is(err, ErrUnknownOrder) {
		t.Errorf("ParseOrder: %v", err)
	}
	if o, err := ParseOrder("links"); err != nil || o != OrderLinks || o.String() != "links" {
		t.Errorf("ParseOrder(links): %v %v", o, err)
	}
	// a non-nil empty candidate list allows no device
	if _, err := Select(m, Request{N: 1, Devices: []int{}}, Tree); !errors.As(err, &ne) || ne.Candidates != 0 || len(ne.Excluded) != 8 {
		t.Errorf("empty candidate list: %v", err)
	}
	// all busy, N = 0
	allBusy := newMI250Node(t, 0, 1, 2, 3, 4, 5, 6, 7)
	if _, err := Select(allBusy, Request{}, Tree); !errors.As(err, &ne) || !strings.Contains(err.Error(), "no device available") {
		t.Errorf("all busy: %v", err)
	}
}

func TestOrderLinks(t *testing.T) {
	m := newMI250Node(t)
	ch, err := Select(m, Request{N: 4, Order: OrderLinks}, Tree)
	if err != nil {
		t.Fatal(err)
	}
	// 1-0 (200000), 0-6 (100000), 6-7 (200000)
	if !slices.Equal(ch.Devices, []int{1, 0, 6, 7}) {
		t.Errorf("links order %v, want 1,0,6,7", ch.Devices)
	}
	ch, err = Select(m, Request{N: 8, Order: OrderLinks}, Tree)
	if err != nil {
		t.Fatal(err)
	}
	if got := pathBottleneck(m.BW, ch.Devices); got != 50000 {
		t.Errorf("N=8 path %v bottleneck %d", ch.Devices, got)
	}
	// the widest path of all 8 is 50000 (every Hamiltonian path must use
	// a 50000 link), and among those the order has the largest total
	want := []int{0, 1, 3, 2, 4, 5, 7, 6}
	if !slices.Equal(ch.Devices, want) && pathTotal(m.BW, ch.Devices) < pathTotal(m.BW, want) {
		t.Errorf("N=8 path %v total %d below %v", ch.Devices, pathTotal(m.BW, ch.Devices), want)
	}
}

func pathBottleneck(bw func(a, b int) int64, order []int) int64 {
	b := int64(1 << 62)
	for i := 1; i < len(order); i++ {
		b = min(b, bw(order[i-1], order[i]))
	}
	return b
}

func pathTotal(bw func(a, b int) int64, order []int) int64 {
	var s int64
	for i := 1; i < len(order); i++ {
		s += bw(order[i-1], order[i])
	}
	return s
}

func TestDeterminism(t *testing.T) {
	m := newMI300XCPXNode(t)
	first, err := Select(m, Request{N: 12}, Tree)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		ch, err := Select(m, Request{N: 12}, Tree)
		if err != nil || !slices.Equal(ch.Devices, first.Devices) {
			t.Fatalf("run %d: %v %v, first %v", i, ch.Devices, err, first.Devices)
		}
	}
	// A whole GPU and 4 partitions of another, on one NUMA node; the 4
	// come from the 7-partition GPU 7 (leaving 3 there rather than 4 on
	// a full GPU: best fit) and the whole GPU is the lowest of its NUMA
	// node, GPU 4.
	if want := []int{32, 33, 34, 35, 36, 37, 38, 39, 56, 57, 58, 59}; !slices.Equal(first.Devices, want) {
		t.Errorf("CPX N=12: %v", first.Devices)
	}
}
