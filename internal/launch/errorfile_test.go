package launch

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

func TestParseErrorFile(t *testing.T) {
	tests := []struct {
		file string
		want RankError
	}{
		{
			// An exception raised while handling another: the last
			// traceback is the one that ended the rank; @record's own
			// frame is left out.
			file: "torch113-chained.json",
			want: RankError{
				Message: "RuntimeError: cannot resume training",
				Frames: [][]string{{`File "/tmp/ef/rec.py", line 18, in main`,
					`raise RuntimeError("cannot resume training") from e`}},
				Timestamp: 1796058334,
			},
		},
		{
			// A deep stack: the innermost three frames, Python 3.11's
			// ^^^ markers dropped; a message of two lines.
			file: "torch113-multiline.json",
			want: RankError{
				Message: "ValueError: loss is nan at step 3\nlr=0.1",
				Frames: [][]string{
					{`File "/tmp/ef/simple.py", line 5, in step`, `return step(i + 1)`},
					{`File "/tmp/ef/simple.py", line 5, in step`, `return step(i + 1)`},
					{`File "/tmp/ef/simple.py", line 4, in step`, `raise ValueError("loss is nan at step 3\nlr=0.1")`},
				},
				Timestamp: 1796058343,
			},
		},
		{
			// torchrun's agent copies its worker's file and adds the
			// exit code: the same format.
			file: "torchrun113-agent.json",
			want: RankError{
				Message: "ValueError: loss is nan at step 3\nlr=0.1",
				Frames: [][]string{
					{`File "/tmp/ef/simple.py", line 5, in step`, `return step(i + 1)`},
					{`File "/tmp/ef/simple.py", line 5, in step`, `return step(i + 1)`},
					{`File "/tmp/ef/simple.py", line 4, in step`, `raise ValueError("loss is nan at step 3\nlr=0.1")`},
				},
				Timestamp: 1796058350,
			},
		},
		{
			file: "string-message.json",
			want: RankError{Message: "RuntimeError: CUDA error: an illegal memory access was encountered", Timestamp: 1796058350},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseErrorFile(testutil.ReadFile(t, testutil.Testdata(t, "errorfile", tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", *got, tt.want)
			}
		})
	}
}

func TestParseErrorFileRefuses(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `{}`, `{"message": 3}`, `{"message": {"extraInfo": {}}}`, `{"message": ""}`,
		`{"message": {"message": "  "}}`, `not json`,
	} {
		if re, err := ParseErrorFile([]byte(in)); !errors.Is(err, ErrErrorFile) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %+v, %v; want one line wrapping ErrErrorFile", in, re, err)
		}
	}
}

// TestRankErrorLines: what a summary prints is bounded and printable,
// whatever the rank wrote.
func TestRankErrorLines(t *testing.T) {
	re := &RankError{
		Message: "Evil: \x1b[2Jcleared\n" + strings.Repeat("line\n", 20),
		Frames:  [][]string{{`File "a.py", line 1, in f`, "x = '\u202e'"}},
	}
	lines := re.Lines()
	want := []string{`Evil: \x1b[2Jcleared`, "line", "line", "line", "line", "line", "line", "line", "line", "line",
		"... (11 more lines)", "traceback, innermost 1 frame(s):", `  File "a.py", line 1, in f`, `    x = '\u202e'`}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines\n%q\nwant\n%q", lines, want)
	}
	long := (&RankError{Message: strings.Repeat("x", 1000)}).Lines()
	if len(long) != 1 || len([]rune(long[0])) != maxErrorWidth {
		t.Errorf("a 1000-character message prints as %d line(s) of %d", len(long), len([]rune(long[0])))
	}
}

func FuzzParseErrorFile(f *testing.F) {
	files, _ := filepath.Glob(testutil.Testdata(f, "errorfile", "*.json"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		re, err := ParseErrorFile(b)
		if err != nil {
			if !errors.Is(err, ErrErrorFile) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: not one line wrapping ErrErrorFile", err)
			}
			return
		}
		if len(re.Frames) > errorFrames {
			t.Fatalf("%d frames", len(re.Frames))
		}
		for _, l := range re.Lines() {
			for _, r := range l {
				if r < 0x20 || r == 0x7f {
					t.Fatalf("line %q holds a control character", l)
				}
			}
		}
	})
}
