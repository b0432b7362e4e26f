package selector

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// placeRule picks size free devices of m for a job, held being every
// device other jobs hold.
type placeRule struct {
	name  string
	place func(m *topology.Model, size int, held map[int]string) []int
}

// simulationRules are the three rules issue #16 compares: a naive
// launcher's first free devices, amdrun's tree policy as it was before
// locality and best fit (the same search with those terms switched off,
// kept here so the comparison stays reproducible), and amdrun now.
var simulationRules = []placeRule{
	{"first free", func(m *topology.Model, size int, held map[int]string) []int {
		var out []int
		for i := 0; i < len(m.Devices) && len(out) < size; i++ {
			if _, ok := held[i]; !ok {
				out = append(out, i)
			}
		}
		return out
	}},
	{"amdrun before", selectWithRules(rules{noLocality: true})},
	{"amdrun (best fit)", selectWithRules(rules{})},
}

func selectWithRules(r rules) func(*topology.Model, int, map[int]string) []int {
	return func(m *topology.Model, size int, held map[int]string) []int {
		ch, err := selectBy(m, Request{N: size, Held: held, Alternatives: -1}, Tree, r)
		if err != nil {
			panic(err)
		}
		return ch.Devices
	}
}

// savio4Matrix is `nvidia-smi topo -m` of an 8-GPU PCIe node
// (testdata/public/nvidia-smi-topo-m-8gpu-pcie-pxb-pix-sys-2nic-savio4.txt):
// GPUs 0-3 on NUMA node 0 and 4-7 on node 1, PXB within a node except
// the PIX pairs 2-3 and 6-7, SYS across.
func newSavio4Node(t testing.TB) *topology.Model {
	return newPCIeNode(t, 8, func(a, b int) string {
		switch {
		case a/4 != b/4:
			return topology.LevelSYS
		case a%4 >= 2 && b == a+1:
			return topology.LevelPIX
		}
		return topology.LevelPXB
	}, func(i int) int { return i / 4 })
}

// jobStream is the outcome of one rule on one node: the mean bottleneck
// (tree bottleneck, MB/s) of the jobs of two or more devices, and the
// share of them that got the bottleneck their size gets on an idle node.
type jobStream struct {
	meanBottleneck float64
	atBest         float64
	jobs           int
}

// simulate runs jobs arrivals (sizes 1, 2, 4, 8 drawn 4:3:2:1, lifetimes
// exponential, arrivals Poisson at a rate that keeps the node about 70%
// busy) through rule, first come first served: a job that does not fit
// waits, and the jobs behind it wait too. The stream is the same for
// every rule (seeded).
func simulate(t testing.TB, m *topology.Model, rule placeRule, jobs int, seed uint64) jobStream {
	r := rand.New(rand.NewPCG(seed, 1))
	sizes := []int{1, 1, 1, 1, 2, 2, 2, 4, 4, 8}
	n := len(m.Devices)
	const meanLife = 10.0
	meanSize := 2.6
	rate := 0.7 * float64(n) / (meanSize * meanLife)
	type job struct {
		size    int
		arrive  float64
		life    float64
		devices []int
		end     float64
	}
	stream := make([]job, jobs)
	clock := 0.0
	for i := range stream {
		clock += r.ExpFloat64() / rate
		stream[i] = job{size: min(sizes[r.IntN(len(sizes))], n), arrive: clock, life: r.ExpFloat64() * meanLife}
	}
	best := map[int]int64{}
	for _, s := range sizes {
		if s >= 2 && s <= n {
			ch, err := Select(m, Request{N: s}, Tree)
			if err != nil {
				t.Fatal(err)
			}
			best[s] = int64(ch.Score.Terms[0].Value)
		}
	}
	held := map[int]string{}
	var running []int // indices into stream
	var out jobStream
	var sum float64
	next := 0 // the next job to start (FIFO)
	now := 0.0
	for next < len(stream) {
		// start what fits, in order
		for next < len(stream) && stream[next].arrive <= now && stream[next].size <= n-len(held) {
			j := &stream[next]
			j.devices = rule.place(m, j.size, held)
			if len(j.devices) != j.size {
				t.Fatalf("%s: %d devices for a job of %d", rule.name, len(j.devices), j.size)
			}
			for _, d := range j.devices {
				if _, dup := held[d]; dup {
					t.Fatalf("%s: device %d given twice", rule.name, d)
				}
				held[d] = fmt.Sprintf("job %d", next)
			}
			j.end = now + j.life
			running = append(running, next)
			if j.size >= 2 {
				b := int64(Tree.Score(m, Request{}, j.devices).Terms[0].Value)
				sum += float64(b)
				out.jobs++
				if b >= best[j.size] {
					out.atBest++
				}
			}
			next++
		}
		if next == len(stream) {
			break
		}
		// advance to the next event: an arrival (if the head could start)
		// or the first end
		tNext := -1.0
		if stream[next].arrive > now && stream[next].size <= n-len(held) {
			tNext = stream[next].arrive
		}
		first := -1
		for i, ri := range running {
			if first < 0 || stream[ri].end < stream[running[first]].end {
				first = i
			}
		}
		if first >= 0 && (tNext < 0 || stream[running[first]].end <= tNext) {
			j := &stream[running[first]]
			now = max(now, j.end)
			for _, d := range j.devices {
				delete(held, d)
			}
			running = slices.Delete(running, first, first+1)
			continue
		}
		now = max(now, tNext)
	}
	out.meanBottleneck = sum / float64(out.jobs)
	out.atBest /= float64(out.jobs)
	return out
}

// TestJobStreamSimulation replays one random stream of 1-, 2-, 4- and
// 8-device jobs on three nodes under each rule (issue #16: best fit on
// shared nodes). amdrun must give jobs at least the bottleneck the old
// rule gave, and both more than first free. With -v it prints the table
// docs/shared-nodes.md shows.
func TestJobStreamSimulation(t *testing.T) {
	jobs, streams := 2000, uint64(5)
	if testing.Short() {
		jobs, streams = 300, 2
	}
	nodes := []struct {
		name string
		m    *topology.Model
	}{
		{"MI250 (seed example, 8 GCDs)", newMI250Node(t)},
		{"MI300X CPX (64 partitions)", newMI300XCPXNodeOf(t, 64, 0, 0)},
		{"8 GPUs on PCIe (savio4)", newSavio4Node(t)},
	}
	var table strings.Builder
	table.WriteString("| node | first free | amdrun before | amdrun (best fit) |\n| --- | --- | --- | --- |\n")
	for _, nd := range nodes {
		res := make([]jobStream, len(simulationRules))
		for i, rule := range simulationRules {
			for seed := uint64(1); seed <= streams; seed++ {
				s := simulate(t, nd.m, rule, jobs, seed)
				res[i].meanBottleneck += s.meanBottleneck / float64(streams)
				res[i].atBest += s.atBest / float64(streams)
				res[i].jobs += s.jobs
			}
		}
		fmt.Fprintf(&table, "| %s |", nd.name)
		for _, r := range res {
			fmt.Fprintf(&table, " %.1f GB/s (%.0f%% at best) |", r.meanBottleneck/1000, 100*r.atBest)
		}
		table.WriteString("\n")
		if res[2].meanBottleneck < res[1].meanBottleneck || res[1].meanBottleneck < res[0].meanBottleneck {
			t.Errorf("%s: mean bottleneck first free %.0f, before %.0f, best fit %.0f MB/s", nd.name,
				res[0].meanBottleneck, res[1].meanBottleneck, res[2].meanBottleneck)
		}
	}
	t.Logf("%d streams of %d jobs per node and rule, mean bottleneck of the jobs of 2+ devices (share of them at the best an idle node gives):\n%s", streams, jobs, table.String())
}
