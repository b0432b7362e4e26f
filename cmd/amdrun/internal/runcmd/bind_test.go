package runcmd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/host"
)

// TestDryRunBindingWords: every binding word, as torchrun's
// --numa-binding and as --bind, planned on the two-socket EPYC tree
// (testdata/host/epyc-2p: 4 NUMA nodes of 8 CPUs, 2 per socket, a core
// complex per 4 CPUs, read by host.CPUGroups), the 8 example devices on NUMA
// nodes 0 and 2 (4 each): the CPU list and memory nodes of each rank.
func TestDryRunBindingWords(t *testing.T) {
	root := testutil.Testdata(t, "host", "epyc-2p")
	nodes, err := host.NUMANodes(root)
	if err != nil {
		t.Fatal(err)
	}
	x4 := func(a, b string) []string { return []string{a, a, a, a, b, b, b, b} }
	tests := []struct {
		torchrun, bind string
		cpus, mems     []string
		warn           string
	}{
		{"node", "numa", x4("0-7", "16-23"), x4("0", "2"), ""},
		{"socket", "socket", x4("0-15", "16-31"), x4("0-1", "2-3"), ""},
		{"exclusive", "exclusive", []string{"0-1", "2-3", "4-5", "6-7", "16-17", "18-19", "20-21", "22-23"}, x4("0", "2"), ""},
		// 4 devices, 2 core complexes per node: each device's fair share.
		{"core-complex", "core-complex", []string{"0-1", "2-3", "4-5", "6-7", "16-17", "18-19", "20-21", "22-23"}, x4("0", "2"), ""},
	}
	for _, tt := range tests {
		for _, flag := range [][]string{{"--numa-binding", tt.torchrun}, {"--bind", tt.bind}} {
			f, out, errOut, warned := epycFactory(t, root, nodes)
			args := append([]string{"--dry-run", "--json", "-n", "8", "--order", "index", "--mem-policy", "bind"}, flag...)
			if err := dryRun(t, f, t.TempDir(), append(args, "train.py")...); err != nil {
				t.Fatalf("%v: %v\n%s", flag, err, errOut)
			}
			cpus, mems := rankCPUs(t, out.Bytes())
			if !reflect.DeepEqual(cpus, tt.cpus) || !reflect.DeepEqual(mems, tt.mems) {
				t.Errorf("%v: cpus %q mems %q\nwant cpus %q mems %q", flag, cpus, mems, tt.cpus, tt.mems)
			}
			if got := bindWarnings(*warned); tt.warn == "" && len(got) > 0 || tt.warn != "" && !reflect.DeepEqual(got, []string{tt.warn}) {
				t.Errorf("%v: warnings %q, want %q", flag, got, tt.warn)
			}
		}
	}
}

// epycFactory is exampleFactory with the 8 example devices on NUMA nodes
// 0 and 2 (4 each) of the host tree at root (nodes read from it): its
// sockets and caches through host.CPUGroups, every CPU of it allowed,
// the warnings kept in warned.
func epycFactory(t *testing.T, root string, nodes []topology.NUMANode) (f *cmdutil.Factory, out, errOut *bytes.Buffer, warned *[]string) {
	t.Helper()
	f, out, errOut = exampleFactory(t, func(m *topology.Model) {
		for i := range m.Devices {
			m.Devices[i].NUMANode = i / 4 * 2
		}
		m.SetNUMANodes(nodes)
	})
	f.HostNUMA = func() ([]topology.NUMANode, error) { return nodes, nil }
	f.HostCPUGroups = func(n []topology.NUMANode) (*topology.CPUGroups, error) { return host.CPUGroups(root, n) }
	f.OwnCPUs = func() []int { return nil }
	warned = new([]string)
	f.Warn = func(format string, a ...any) { *warned = append(*warned, fmt.Sprintf(format, a...)) }
	return f, out, errOut, warned
}

// TestDryRunExclusiveAvoidsLeasedCPUs: CPUs another job leases are left
// out of an exclusive plan; when too few are left the plan binds to the
// node, with one warning.
func TestDryRunExclusiveAvoidsLeasedCPUs(t *testing.T) {
	root := testutil.Testdata(t, "host", "epyc-2p")
	nodes, err := host.NUMANodes(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := lease.Open(dir, lease.Options{Create: true})
	if err != nil {
		t.Skip("no leases here:", err)
	}
	defer d.Close()
	other, err := d.AcquireCPUs([]int{0, 1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	for _, tt := range []struct {
		n     string
		cpus  []string
		warns int
	}{
		{"2", []string{"6", "7"}, 0},
		{"3", []string{"0-7", "0-7", "0-7"}, 1},
	} {
		f, out, errOut := exampleFactory(t, func(m *topology.Model) {
			for i := range m.Devices {
				m.Devices[i].NUMANode = 0
			}
			m.SetNUMANodes(nodes)
		})
		f.HostNUMA = func() ([]topology.NUMANode, error) { return nodes, nil }
		f.OwnCPUs = func() []int { return nil }
		var warned []string
		f.Warn = func(format string, a ...any) { warned = append(warned, fmt.Sprintf(format, a...)) }
		if err := dryRun(t, f, dir, "--dry-run", "--json", "-n", tt.n, "--numa-binding", "exclusive", "train.py"); err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		cpus, _ := rankCPUs(t, out.Bytes())
		if !reflect.DeepEqual(cpus, tt.cpus) {
			t.Errorf("-n %s: cpus %q, want %q", tt.n, cpus, tt.cpus)
		}
		w := bindWarnings(warned)
		if len(w) != tt.warns || tt.warns == 1 && !strings.Contains(w[0], "other amdrun jobs lease CPUs of NUMA node 0 (0-5 of its CPUs 0-7; local rank ") {
			t.Errorf("-n %s: warnings %q", tt.n, w)
		}
	}
}

func rankCPUs(t *testing.T, doc []byte) (cpus, mems []string) {
	t.Helper()
	var p struct {
		Ranks []struct {
			CPUs []int `json:"cpus"`
			Mems []int `json:"mems"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal(doc, &p); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	for _, r := range p.Ranks {
		cpus = append(cpus, topology.FormatCPUList(r.CPUs))
		mems = append(mems, topology.FormatCPUList(r.Mems))
	}
	return cpus, mems
}

// bindWarnings are the warnings about binding (not the OMP_NUM_THREADS
// note, the Python line or the lease directory).
func bindWarnings(all []string) []string {
	var out []string
	for _, w := range all {
		if strings.HasPrefix(w, "bind") {
			out = append(out, w)
		}
	}
	return out
}

// TestDryRunBindingWithoutCaches: on a host that lists no caches (a VM
// without cpu*/cache, issue 31: the epyc-2p tree without its cache
// directories), --bind socket still binds to sockets, which need only
// physical_package_id, quietly; core-complex binds to the NUMA nodes,
// with one line saying why.
func TestDryRunBindingWithoutCaches(t *testing.T) {
	src := testutil.Testdata(t, "host", "epyc-2p")
	files := map[string]string{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, "/cache/") {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		files[rel] = string(testutil.ReadFile(t, p))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	root := testutil.FakeRoot(t, files)
	nodes, err := host.NUMANodes(root)
	if err != nil {
		t.Fatal(err)
	}
	x4 := func(a, b string) []string { return []string{a, a, a, a, b, b, b, b} }
	for _, tt := range []struct {
		bind, warn string
		cpus       []string
	}{
		{"socket", "", x4("0-15", "16-31")},
		{"core-complex", "bind core-complex: ranks are bound to their NUMA nodes: NUMA node 0 under " + root +
			": no level-3 cache listed for CPU(s) 0-7 (node/nodeN/cpuM/cache)", x4("0-7", "16-23")},
	} {
		f, out, errOut, warned := epycFactory(t, root, nodes)
		if err := dryRun(t, f, t.TempDir(), "--dry-run", "--json", "-n", "8", "--order", "index", "--bind", tt.bind, "train.py"); err != nil {
			t.Fatalf("%s: %v\n%s", tt.bind, err, errOut)
		}
		if cpus, _ := rankCPUs(t, out.Bytes()); !reflect.DeepEqual(cpus, tt.cpus) {
			t.Errorf("%s: cpus %q, want %q", tt.bind, cpus, tt.cpus)
		}
		if got := bindWarnings(*warned); tt.warn == "" && len(got) > 0 || tt.warn != "" && !reflect.DeepEqual(got, []string{tt.warn}) {
			t.Errorf("%s: warnings %q, want %q", tt.bind, got, tt.warn)
		}
	}
}
