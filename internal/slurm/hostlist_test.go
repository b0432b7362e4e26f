package slurm

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

func TestParseHostlist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"gpu[01-04,07],login1", []string{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"}},
		{"n[008-011]", []string{"n008", "n009", "n010", "n011"}},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}},
		{"n[98-101]", []string{"n98", "n99", "n100", "n101"}},
		{"rack[1-2]-n[1-2]", []string{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
		{"node1", []string{"node1"}},
		{"a,b,c", []string{"a", "b", "c"}},
		{"n[3]", []string{"n3"}},
		{"n[007]", []string{"n007"}},
		{"n[1,3,5]", []string{"n1", "n3", "n5"}},
		{"n[1-2]-ib", []string{"n1-ib", "n2-ib"}},
		{"[1-2]", []string{"1", "2"}},
		{"n[1-1]", []string{"n1"}},
		{"a-b.example.com", []string{"a-b.example.com"}},
		{"n[2,1,2]", []string{"n2", "n1", "n2"}}, // order and duplicates kept, as Slurm does
		{"  gpu[1-2]\n", []string{"gpu1", "gpu2"}},
		{"lumi-g[0001-0002],lumi-g0010", []string{"lumi-g0001", "lumi-g0002", "lumi-g0010"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseHostlist(tt.in)
			if err != nil {
				t.Fatalf("ParseHostlist(%q): %v", tt.in, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseHostlist(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseHostlistLimit(t *testing.T) {
	got, err := ParseHostlist("n[1-65536]")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxHosts || got[0] != "n1" || got[MaxHosts-1] != "n65536" {
		t.Errorf("n[1-65536]: %d names, first %q, last %q", len(got), got[0], got[len(got)-1])
	}
}

func TestParseHostlistErrors(t *testing.T) {
	tests := []struct {
		in   string
		col  int
		err  error
		text string
	}{
		{"gpu[01-04", 3, ErrUnbalanced, `slurm hostlist "gpu[01-04": column 3: unbalanced bracket`},
		{"gpu[01-04,login1", 3, ErrUnbalanced, `slurm hostlist "gpu[01-04,login1": column 3: unbalanced bracket`},
		{"gpu01]", 5, ErrUnbalanced, `slurm hostlist "gpu01]": column 5: unbalanced bracket`},
		{"n[1[2]]", 3, ErrUnbalanced, `slurm hostlist "n[1[2]]": column 3: unbalanced bracket`},
		{"n[4-2]", 2, ErrReversedRange, `slurm hostlist "n[4-2]": column 2: range end is below its start`},
		{"n[a-b]", 2, ErrNotNumeric, `slurm hostlist "n[a-b]": column 2: not a number or a range lo-hi`},
		{"n[1-b]", 4, ErrNotNumeric, `slurm hostlist "n[1-b]": column 4: not a number or a range lo-hi`},
		{"n[1-2-3]", 4, ErrNotNumeric, `slurm hostlist "n[1-2-3]": column 4: not a number or a range lo-hi`},
		{"n[-3]", 2, ErrNotNumeric, `slurm hostlist "n[-3]": column 2: not a number or a range lo-hi`},
		{"n[1,,2]", 4, ErrEmptyElement, `slurm hostlist "n[1,,2]": column 4: empty element`},
		{"a,,b", 2, ErrEmptyElement, `slurm hostlist "a,,b": column 2: empty element`},
		{",a", 0, ErrEmptyElement, `slurm hostlist ",a": column 0: empty element`},
		{"a,", 2, ErrEmptyElement, `slurm hostlist "a,": column 2: empty element`},
		{"n[]", 2, ErrEmptyElement, `slurm hostlist "n[]": column 2: empty element`},
		{"", 0, ErrEmptyElement, `slurm hostlist "": column 0: empty element`},
		{"   ", 0, ErrEmptyElement, `slurm hostlist "   ": column 0: empty element`},
		{"a b", 1, ErrBadChar, `slurm hostlist "a b": column 1: invalid character`},
		{"n[0-65536]", 2, ErrTooManyHosts, `slurm hostlist "n[0-65536]": column 2: expands to more than 65536 hosts`},
		{"n[1-60000,1-6000]", 10, ErrTooManyHosts, `slurm hostlist "n[1-60000,1-6000]": column 10: expands to more than 65536 hosts`},
		{"x[1-300]y[1-300]", 0, ErrTooManyHosts, `slurm hostlist "x[1-300]y[1-300]": column 0: expands to more than 65536 hosts`},
		{"a[1-40000],b[1-40000]", 11, ErrTooManyHosts, `slurm hostlist "a[1-40000],b[1-40000]": column 11: expands to more than 65536 hosts`},
		{"n[1-9999999999999999999]", 4, ErrNotNumeric, `slurm hostlist "n[1-9999999999999999999]": column 4: not a number or a range lo-hi`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseHostlist(tt.in)
			if err == nil {
				t.Fatalf("ParseHostlist(%q) = %q, want error", tt.in, got)
			}
			var pe *topology.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *topology.ParseError: %v", err, err)
			}
			want := &topology.ParseError{Source: "slurm hostlist " + fmt.Sprintf("%q", tt.in), Column: tt.col}
			if pe.Source != want.Source || pe.Line != 0 || pe.Column != want.Column {
				t.Errorf("ParseError{Source: %q, Line: %d, Column: %d}, want {%q, 0, %d}", pe.Source, pe.Line, pe.Column, want.Source, want.Column)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.err)
			}
			if err.Error() != tt.text {
				t.Errorf("message\n got %s\nwant %s", err, tt.text)
			}
		})
	}
}

func TestParseHostlistLongInputIsCut(t *testing.T) {
	in := strings.Repeat("a", 200) + "]"
	_, err := ParseHostlist(in)
	if err == nil {
		t.Fatal("want error")
	}
	if len(err.Error()) > 150 || !strings.Contains(err.Error(), `..."`) && !strings.Contains(err.Error(), `"...`) {
		t.Errorf("message not cut: %d bytes: %s", len(err.Error()), err)
	}
	if !strings.Contains(err.Error(), "column 200") {
		t.Errorf("message lacks the position: %s", err)
	}
}

// seeds reads testdata/slurm/hostlists.txt.
func seeds(t testing.TB) []string {
	f, err := os.Open(testutil.Testdata(t, "slurm", "hostlists.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func FuzzParseHostlist(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ParseHostlist(s)
		if err != nil {
			var pe *topology.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *topology.ParseError: %v", err, err)
			}
			if pe.Column < 0 || pe.Column > len(s) {
				t.Fatalf("column %d outside input of %d bytes", pe.Column, len(s))
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if len(names) == 0 || len(names) > MaxHosts {
			t.Fatalf("ParseHostlist(%q) gave %d names", s, len(names))
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, "[],") {
				t.Fatalf("ParseHostlist(%q) gave bad name %q", s, n)
			}
		}
		again, err := ParseHostlist(strings.Join(names, ","))
		if err != nil {
			t.Fatalf("re-parsing the expansion of %q: %v", s, err)
		}
		if !slices.Equal(again, names) {
			t.Fatalf("round trip of %q: %q != %q", s, again, names)
		}
	})
}
