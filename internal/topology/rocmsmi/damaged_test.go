package rocmsmi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// Issue 24: a damaged section title is never skipped without a word. Each
// case alters the ARCHER2 MI210 --showtopo capture the way captures break
// and checks the note that names the line, and whether the section was
// still read (the model then equals the original's).
func TestDamagedSectionTitles(t *testing.T) {
	orig := string(testutil.ReadFile(t, public(t, "rocm-smi-showtopo-mi210-4gpu-xgmi-nps4-archer2.txt")))
	lines := strings.SplitAfter(orig, "\n")
	const weight = "=========================== Weight between two GPUs ============================\n"
	if lines[1] != weight {
		t.Fatalf("line 2 of the capture is %q", lines[1])
	}
	with := func(i int, l string) string {
		ls := append([]string{}, lines...)
		ls[i] = l
		return strings.Join(ls, "")
	}
	swap := func(i, j int) string {
		ls := append([]string{}, lines...)
		ls[i], ls[j] = ls[j], ls[i]
		return strings.Join(ls, "")
	}
	modelOf := func(text string) (string, []string) {
		t.Helper()
		r, err := ParseText(strings.NewReader(text))
		if err != nil {
			t.Fatalf("ParseText: %v", err)
		}
		m, warns := mustModel(t, r)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), warns
	}
	want, origWarns := modelOf(orig)
	if len(origWarns) != 0 {
		t.Fatalf("the original warns: %q", origWarns)
	}
	for _, tc := range []struct {
		name, text, note string
		read             bool // the section is still read
	}{
		{"words run together", with(1, "=========================== Weightbetween two GPUs ============================\n"),
			`line 2: section title "weightbetween two gpus" is damaged; read as "weight between two gpus"`, true},
		{"in ANSI escapes", with(1, "\x1b[1m"+strings.TrimSuffix(weight, "\n")+"\x1b[0m\n"),
			"1 line(s) held terminal escape codes (first: line 2); read without them", true},
		{"two titles on one line", with(1, "=========== Weight between two GPUs ====================== Hops between two GPUs ===========\n"),
			`line 2: banner "weight between two gpus ====================== hops between two gpus" holds more than one section title`, false},
		{"title inside other text", with(1, "====== rocm-smi: Weight between two GPUs (partial) ======\n"),
			`line 2: section title "rocm-smi: weight between two gpus (partial)" holds "weight between two gpus" and other text`, false},
		{"swapped with the banner above", swap(0, 1),
			`the "weight between two gpus" section has no table (the next section title is at line 2)`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warns := modelOf(tc.text)
			if !strings.Contains(strings.Join(warns, "\n"), tc.note) {
				t.Errorf("warnings %q, want one holding %q", warns, tc.note)
			}
			if tc.read && got != want {
				t.Errorf("model %s\nwant %s", got, want)
			}
			if !tc.read && got == want {
				t.Errorf("the section was read: the case does not damage it")
			}
		})
	}
	// The swap also leaves the table under the wrong title: it is noted
	// too, at its own line.
	_, warns := modelOf(swap(0, 1))
	if !strings.Contains(strings.Join(warns, "\n"), "line 3: a GPU table with no section title above it") {
		t.Errorf("warnings %q, want the untitled table at line 3", warns)
	}
}

// A title damaged past recognition ("Wxight") leaves its section unread;
// Discover warns that the --showtopo output lacks it.
func TestDiscoverWarnsMissingSection(t *testing.T) {
	orig := testutil.ReadFile(t, public(t, "rocm-smi-showtopo-mi210-4gpu-xgmi-nps4-archer2.txt"))
	for _, tc := range []struct {
		name string
		out  []byte
		want string
	}{
		{"whole", orig, ""},
		{"weight title garbled", bytes.Replace(orig, []byte("Weight between"), []byte("Wxight between"), 1),
			"rocm-smi: `rocm-smi --showtopo --shownodesbw` printed no \"weight between two gpus\" section; continuing without it"},
		{"numa section gone", bytes.Replace(orig, []byte("Numa Nodes"), []byte("Numa Nodez"), 1),
			"rocm-smi: `rocm-smi --showtopo --shownodesbw` printed no \"numa nodes\" section; continuing without it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{out: map[string][]byte{"rocm-smi --showtopo --shownodesbw": tc.out}}
			var warns []string
			if _, err := Discover(context.Background(), f.run, func(s string, a ...any) { warns = append(warns, fmt.Sprintf(s, a...)) }); err != nil {
				t.Fatal(err)
			}
			var missing []string
			for _, w := range warns {
				if strings.Contains(w, "printed no") {
					missing = append(missing, w)
				}
			}
			switch {
			case tc.want == "" && len(missing) > 0:
				t.Errorf("warnings %q for a whole output", missing)
			case tc.want != "" && (len(missing) != 1 || missing[0] != tc.want):
				t.Errorf("warnings %q, want %q", missing, tc.want)
			}
		})
	}
}
