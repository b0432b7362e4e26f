package archtest

import (
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docFiles are the documents whose quoted messages must be the code's.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(moduleRoot, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/*.md: %v (%d files)", err, len(files))
	}
	return append(files, filepath.Join(moduleRoot, "README.md"))
}

// inlineQuote is a message quoted in running text: `amdrun: ...`, or
// any code followed by the exit status it comes with, `...` (exit 2),
// unless it is a command line (`amdrun topo` (exit 1 ...)).
var inlineQuote = regexp.MustCompile("`(amdrun: [^`]+)`|`([^`]+)`,? \\(exit")

// quotedMessages are the messages doc quotes as amdrun prints them:
// lines of its code blocks that start with "amdrun: ", and inline code
// that does or that an exit status follows (a paragraph's lines joined,
// as markdown joins them).
func quotedMessages(t *testing.T, doc string) []string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var para []string
	inBlock := false
	flush := func() {
		for _, m := range inlineQuote.FindAllStringSubmatch(strings.Join(para, " "), -1) {
			if m[1] != "" {
				out = append(out, m[1])
			} else if !strings.HasPrefix(m[2], "amdrun ") {
				out = append(out, m[2])
			}
		}
		para = para[:0]
	}
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "```"):
			flush()
			inBlock = !inBlock
		case inBlock && strings.HasPrefix(l, "amdrun: "):
			out = append(out, l)
		case inBlock:
		case strings.TrimSpace(l) == "":
			flush()
		default:
			para = append(para, strings.TrimSpace(l))
		}
	}
	flush()
	return out
}

// verb is a fmt verb of a format string.
var verb = regexp.MustCompile(`%[-+# 0]*[0-9]*(\.[0-9]+)?[a-zA-Z%]`)

// formats are the module's non-test string literals (a + of them and of
// other values as one, each value a %v), and the texts that one function
// writes piece by piece to one writer (fmt.Fprintf(&b, ...) and
// b.WriteString, up to three pieces in their order), each as a
// regular expression whose verbs match any text.
type formats struct {
	// whole are the formats with enough text of their own (12
	// characters besides their verbs) to tell a message; wrappers the
	// others that start with a verb ("%w (%s)"), which print a message
	// first.
	whole, wrappers []*regexp.Regexp
}

func codeFormats(t *testing.T) *formats {
	t.Helper()
	fm := &formats{}
	add := func(s string) {
		s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimRight(s, "\n"), "amdrun: "), "warning: ")
		switch {
		case len(verb.ReplaceAllString(s, "")) >= 12:
			fm.whole = append(fm.whole, formatPattern(s, false))
		case verb.FindStringIndex(s) != nil && verb.FindStringIndex(s)[0] == 0:
			fm.wrappers = append(fm.wrappers, formatPattern(s, true))
		}
	}
	walkGo(t, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if fd, ok := n.(*ast.FuncDecl); ok && fd.Body != nil {
				for _, s := range pieceTexts(fd.Body) {
					add(s)
				}
			}
			s, ok := constString(n)
			if ok {
				add(s)
			}
			return !ok // a concatenation's parts are in it
		})
	})
	return fm
}

// pieceTexts are the texts body writes piece by piece to one writer:
// every ordered choice of two or three of its fmt.Fprintf and
// WriteString calls with a literal format on the same writer.
func pieceTexts(body *ast.BlockStmt) []string {
	pieces := map[string][]string{}
	var order []string
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		var w ast.Expr
		var lit string
		switch {
		case sel.Sel.Name == "Fprintf" && len(call.Args) >= 2:
			w = call.Args[0]
			lit, ok = constString(call.Args[1])
		case sel.Sel.Name == "WriteString":
			w = sel.X
			lit, ok = constString(call.Args[0])
		default:
			return true
		}
		if key := types.ExprString(w); ok {
			if pieces[key] == nil {
				order = append(order, key)
			}
			pieces[key] = append(pieces[key], lit)
		}
		return true
	})
	var out []string
	for _, key := range order {
		p := pieces[key]
		for i := range p {
			for j := i + 1; j < len(p); j++ {
				out = append(out, p[i]+p[j])
				for k := j + 1; k < len(p); k++ {
					out = append(out, p[i]+p[j]+p[k])
				}
			}
		}
	}
	return out
}

// constString is n's text when it is a string literal, or a + of
// literals and other values (each a %v).
func constString(n ast.Node) (string, bool) {
	switch e := n.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok := constString(e.X)
		b, ok2 := constString(e.Y)
		if !ok && !ok2 {
			return "", false
		}
		if !ok {
			a = "%v"
		}
		if !ok2 {
			b = "%v"
		}
		return a + b, true
	}
	return "", false
}

// internalPrefix is root.internalPrefix: the names of amdrun's packages
// that the command takes out of its messages.
var internalPrefix = regexp.MustCompile(`(^|: )(launch|selector): `)

// formatPattern is format as a regular expression matching what it
// prints: its text as it is, each verb any text (the first one a group
// with capture), without the package names amdrun leaves out.
func formatPattern(format string, capture bool) *regexp.Regexp {
	format = internalPrefix.ReplaceAllString(format, "$1")
	var b strings.Builder
	last := 0
	for _, m := range verb.FindAllStringIndex(format, -1) {
		b.WriteString(regexp.QuoteMeta(format[last:m[0]]))
		switch {
		case format[m[1]-1] == '%':
			b.WriteString("%")
		case capture:
			b.WriteString("(.*?)")
			capture = false
		default:
			b.WriteString(".*")
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(format[last:]))
	return regexp.MustCompile("^" + b.String() + "$")
}

// printed says whether msg ("amdrun: " and "warning: " left off) is
// what a format of the code prints: one with text enough of its own, or
// a wrapper whose first verb prints such a message; maybe behind the
// prefixes ("slurm: ", "--ngpus 9: ") that wrapping errors add.
func (fm *formats) printed(msg string, depth int) bool {
	for range 3 {
		for _, re := range fm.whole {
			if re.MatchString(msg) {
				return true
			}
		}
		for _, re := range fm.wrappers {
			if m := re.FindStringSubmatch(msg); m != nil && depth < 2 && len(m[1]) < len(msg) && fm.printed(m[1], depth+1) {
				return true
			}
		}
		_, rest, ok := strings.Cut(msg, ": ")
		if !ok {
			return false
		}
		msg = rest
	}
	return false
}

// TestDocsQuoteMessagesTheCodePrints: every message docs/*.md and the
// README quote as amdrun prints it ("amdrun: ..." in a code block or
// inline code) is printed by a format string of the code, its verbs
// standing for the values shown (issue 31: troubleshooting.md quoted
// "--nnodes 2 needs --master-port", which the code no longer says).
func TestDocsQuoteMessagesTheCodePrints(t *testing.T) {
	fm := codeFormats(t)
	n := 0
	for _, doc := range docFiles(t) {
		for _, q := range quotedMessages(t, doc) {
			n++
			msg := strings.TrimPrefix(strings.TrimPrefix(q, "amdrun: "), "warning: ")
			if !fm.printed(msg, 0) {
				t.Errorf("%s quotes %q, which no format string of the code prints", filepath.Base(doc), q)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d quoted messages found in the docs, want the dozens they hold", n)
	}
}

// The matcher takes a message behind wrapping prefixes and through a
// wrapper, and refuses one whose text no format has.
func TestPrinted(t *testing.T) {
	fm := &formats{
		whole:    []*regexp.Regexp{formatPattern("launch: --ngpus %d: only %d available (free: %s)", false), formatPattern("no GPU found", false)},
		wrappers: []*regexp.Regexp{formatPattern("%w (%s)", true)},
	}
	for msg, want := range map[string]bool{
		"--ngpus 9: only 8 available (free: 0,1)":                            true,
		"slurm: --ngpus 9: only 8 available (free: 0,1)":                     true,
		"no GPU found (sysfs: none)":                                         true,
		"no GPU here (sysfs: none)":                                          false,
		"--nnodes 2 needs --master-port (every node must use the same port)": false,
		"--ngpus 9: only 8 available (free: 0,1); ask root":                  false,
	} {
		if got := fm.printed(msg, 0); got != want {
			t.Errorf("printed(%q) = %v, want %v", msg, got, want)
		}
	}
}
