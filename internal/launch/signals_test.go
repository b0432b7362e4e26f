package launch

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseSignals(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "SIGTERM,SIGINT,SIGHUP,SIGQUIT", want: "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},
		{in: "term, usr1 ,SIGTERM", want: "SIGTERM,SIGUSR1"},
		{in: "SIGUSR2,", want: "SIGUSR2"},
		{in: "SIGCONT", want: "SIGCONT"},
		{in: "SIGNOPE", err: "SIGNOPE is not a signal"},
		{in: "SIGSTOP", err: "SIGSTOP cannot be forwarded"},
		{in: "CHLD", err: "SIGCHLD cannot be forwarded"},
		{in: "", err: "empty list of signals"},
	} {
		got, err := ParseSignals(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want error %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || signalNames(got) != tc.want {
			t.Errorf("%q: %s, %v; want %s", tc.in, signalNames(got), err, tc.want)
		}
	}
}

// TestPrefixFromTemplate: Python's string.Template.safe_substitute with
// torch's three names.
func TestPrefixFromTemplate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[rank${rank}]: ", "[rank3]: "},
		{"[$role_name$local_rank]:", "[trainer1]:"},
		{"$rank0 $$rank ${nope} $nope $", "$rank0 $rank ${nope} $nope $"},
		{"${rank", "${rank"},
		{"plain", "plain"},
	} {
		if got := PrefixFromTemplate(tc.in, "trainer", 3, 1); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzPrefixFromTemplate: no template panics, and one without "$" is
// kept as written.
func FuzzPrefixFromTemplate(f *testing.F) {
	for _, s := range []string{"[rank${rank}]: ", "$$", "${", "$", "$role_name$local_rank"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := PrefixFromTemplate(s, "r", 1, 0)
		if !strings.Contains(s, "$") && got != s {
			t.Fatalf("%q became %q", s, got)
		}
	})
}

// FuzzParseSignals: no list panics; a parsed list is non-empty and
// names signals ParseSignals reads back the same.
func FuzzParseSignals(f *testing.F) {
	for _, s := range []string{"SIGTERM,SIGINT", "usr1", ",", "SIGKILL", "sig"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sigs, err := ParseSignals(s)
		if err != nil {
			return
		}
		again, err := ParseSignals(signalNames(sigs))
		if len(sigs) == 0 || err != nil || signalNames(again) != signalNames(sigs) {
			t.Fatalf("%q: %v then %v, %v", s, sigs, again, err)
		}
	})
}

// signalNames names sigs as torchrun's --signals-to-handle does
// ("SIGINT,SIGTERM").
func signalNames(sigs []os.Signal) string {
	names := make([]string, 0, len(sigs))
	for _, s := range sigs {
		if ss, ok := s.(syscall.Signal); ok {
			names = append(names, unix.SignalName(ss))
		}
	}
	return strings.Join(names, ",")
}

// TestSignalListsInDocs: docs/torchrun.md's --signals-to-handle row names
// the one forwarded list and the one stopping list, in their order.
func TestSignalListsInDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/torchrun.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "| `--signals-to-handle") {
			row = l
		}
	}
	stop := strings.Join(StopSignals[:len(StopSignals)-1], ", ") + " and " + StopSignals[len(StopSignals)-1]
	for _, want := range []string{"(default " + strings.Join(ForwardedSignals, ", ") + ")", "; " + stop + " also stop the job"} {
		if !strings.Contains(row, want) {
			t.Errorf("docs/torchrun.md's --signals-to-handle row lacks %q:\n%s", want, row)
		}
	}
}
