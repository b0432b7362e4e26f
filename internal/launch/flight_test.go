package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

func fre(pg string, seq int, op, state string) FREntry {
	return FREntry{PG: pg, Desc: "default_pg", Seq: seq, Op: op, State: state, In: [][]int64{{4}}, Out: [][]int64{{4}}}
}

// TestFRSummary: the paragraph names the collective the furthest ranks
// wait in or completed, the ranks that never entered it with the last
// they did, the ranks without a dump and the dumps that could not be
// read.
func TestFRSummary(t *testing.T) {
	done1 := fre("0", 1, "gloo:all_reduce", "completed")
	for _, tc := range []struct {
		name  string
		dumps []FRDump
		ranks []int
		want  string
	}{
		{"rank 2 behind", []FRDump{
			{Rank: 0, Entries: []FREntry{done1, fre("0", 2, "gloo:all_reduce", "started")}},
			{Rank: 1, Entries: []FREntry{done1, fre("0", 2, "gloo:all_reduce", "started")}},
			{Rank: 2, Entries: []FREntry{done1}},
			{Rank: 3, Entries: []FREntry{done1, fre("0", 2, "gloo:all_reduce", "scheduled")}},
		}, []int{0, 1, 2, 3},
			"torch's flight recorder: process group 0 (default_pg): ranks 0,1,3 wait in gloo:all_reduce #2 (sizes [[4]]), after gloo:all_reduce #1 (sizes [[4]]); rank 2 never entered #2: last entered gloo:all_reduce #1 (sizes [[4]]), completed."},
		{"all done", []FRDump{
			{Rank: 0, Entries: []FREntry{done1}},
			{Rank: 1, Entries: []FREntry{done1}},
		}, []int{0, 1},
			"torch's flight recorder: process group 0 (default_pg): every rank completed gloo:all_reduce #1 (sizes [[4]]) last."},
		{"no dump, unreadable, none recorded", []FRDump{
			{Rank: 0, Entries: []FREntry{done1}},
			{Rank: 1, Error: "UnpicklingError: refused posix.system"},
			{Rank: 2, PGs: map[string][]int{"0": {0, 1, 2, 3}}},
		}, []int{0, 1, 2, 3},
			"torch's flight recorder: process group 0 (default_pg): rank 0 completed gloo:all_reduce #1 (sizes [[4]]) last; rank 2 never entered #1; rank 1's dump could not be read (UnpicklingError: refused posix.system); rank 3 wrote no dump."},
		{"nothing recorded", []FRDump{{Rank: 0}}, []int{0, 1}, ""},
		{"p2p only", []FRDump{{Rank: 0, Entries: []FREntry{{PG: "0", Seq: 0, P2P: true, Op: "nccl:send"}}}}, []int{0}, ""},
	} {
		if got := FRSummary(tc.dumps, tc.ranks); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestFRParse: the reader's lines, with lines that are no JSON and files
// that are no dump of amdrun's skipped.
func TestFRParse(t *testing.T) {
	out := `{"file": "fr.0.1", "entries": [{"pg": "0", "desc": "default_pg", "seq": 3, "p2p": false, "op": "nccl:all_reduce", "state": "completed", "in": [[2, 3]], "out": [[2, 3]]}], "pgs": {"0": [0, 1]}}
Traceback (most recent call last):
{"file": "fr.0.0", "error": "EOFError: Ran out of input"}
{"file": "other", "entries": []}
`
	ds := FRParse(out, frRankOf)
	if len(ds) != 2 || ds[0].Rank != 0 || ds[0].Error == "" || ds[1].Rank != 1 || len(ds[1].Entries) != 1 ||
		ds[1].Entries[0].Seq != 3 || ds[1].Entries[0].In[0][1] != 3 || len(ds[1].PGs["0"]) != 2 {
		t.Fatalf("FRParse: %+v", ds)
	}
}

func FuzzFRParse(f *testing.F) {
	f.Add(string(testutil.ReadFile(f, testutil.Testdata(f, "fr", "reader.jsonl"))))
	f.Add(`{"file": "fr.0.0", "entries": [{"pg": "0", "seq": 1, "op": "x", "state": "completed"}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		ds := FRParse(s, frRankOf)
		_ = FRSummary(ds, []int{0, 1, 2, 3})
	})
}

// TestFRReader: the reader, run with this host's python3, reads a plain
// pickle and refuses one that names a function (a dump is written by a
// rank, perhaps of another user, and read by amdrun, perhaps root).
func TestFRReader(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	dir := t.TempDir()
	mk := `import os, pickle, sys
d = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
     "entries": [{"process_group": ("0", "default_pg"), "collective_seq_id": 1, "is_p2p": False,
                  "profiling_name": "gloo:all_reduce", "state": "completed", "input_sizes": [[4]], "output_sizes": [[4]]}]}
open(sys.argv[1], "wb").write(pickle.dumps(d))
open(sys.argv[2], "wb").write(pickle.dumps(os.system))
`
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if out, err := exec.Command(py, "-c", mk, good, bad).CombinedOutput(); err != nil {
		t.Fatalf("making the pickles: %v: %s", err, out)
	}
	out := readDumpFiles(t, py, good, bad)
	ds := FRParse(string(out), frRankOf)
	if len(ds) != 2 || len(ds[0].Entries) != 1 || ds[0].Entries[0].Op != "gloo:all_reduce" || !strings.Contains(ds[1].Error, "refused") {
		t.Fatalf("reader's dumps: %+v\n%s", ds, out)
	}
	if got := FRSummary(ds, []int{0, 1}); !strings.Contains(got, "rank 0 completed gloo:all_reduce #1") {
		t.Errorf("summary: %s", got)
	}
}

// TestFRRecordedDump: the dumps torch 2.11 wrote on the H200 machine for
// two gloo ranks, rank 1 asleep before the second all_reduce
// (testdata/fr, with the script), read by this host's python3 as amdrun
// reads them, give the reader's recorded lines and the paragraph: gloo's
// entries stay "scheduled", the completion comes from pg_status.
func TestFRRecordedDump(t *testing.T) {
	want := string(testutil.ReadFile(t, testutil.Testdata(t, "fr", "reader.jsonl")))
	const para = "torch's flight recorder: process group 0 (default_pg): rank 0 waits in gloo:all_reduce #2 (sizes [[4]]), after gloo:all_reduce #1 (sizes [[4]]); rank 1 never entered #2: last entered gloo:all_reduce #1 (sizes [[4]]), completed."
	if got := FRSummary(FRParse(want, frRankOf), []int{0, 1}); got != para {
		t.Errorf("paragraph:\n got %s\nwant %s", got, para)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH to run the reader")
	}
	out := readDumpFiles(t, py, testutil.Testdata(t, "fr", "torch211-gloo-rank0.pkl"), testutil.Testdata(t, "fr", "torch211-gloo-rank1.pkl"))
	if out != want {
		t.Errorf("reader:\n got %s\nwant %s", out, want)
	}
}

// TestFRFileNames: the dump files are fr.ATTEMPT.RANK (the bootstrap's
// fr.ATTEMPT.RANK.tmp while it writes one), and nothing else.
func TestFRFileNames(t *testing.T) {
	for name, want := range map[string]int{"fr.0.3": 3, "fr.12.0": 0, "fr.0.3.tmp": -1, "fr.0.": -1, "fr.a.1": -1, "xfr.0.1": -1, "fr.0.1/x": -1} {
		r, ok := frRankOf(name)
		if ok != (want >= 0) || ok && r != want {
			t.Errorf("%q: rank %d %v, want %d", name, r, ok, want)
		}
	}
}

// readDumpFiles runs the reader with py on paths as amdrun does (as
// fr.0.0, fr.0.1, ... on inherited descriptors) and returns its output.
func readDumpFiles(t *testing.T, py string, paths ...string) string {
	t.Helper()
	args := []string{"-I", "-c", frReader}
	var files []*os.File
	for i, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
		args = append(args, fmt.Sprintf("fr.0.%d=%d", i, 3+i))
	}
	cmd := exec.Command(py, args...)
	cmd.ExtraFiles = files
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reader: %v", err)
	}
	return string(out)
}
