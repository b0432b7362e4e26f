package kfd

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/amdrun/amdrun/internal/testutil"
)

func FuzzParseProps(f *testing.F) {
	for _, tree := range []string{"topo-mi210-xgmi-pcie", "topology-parsing-mi308", "topology-parsing"} {
		root := testutil.KFD(f, tree)
		fsys := os.DirFS(root)
		n := 0
		fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "properties" && n < 12 {
				if b, err := fs.ReadFile(fsys, p); err == nil {
					f.Add(b)
					n++
				}
			}
			return nil
		})
	}
	f.Add([]byte("weight abc\n"))
	f.Add([]byte("type 2\ntype 2\n"))
	f.Add([]byte(" \r\n\tkey\t1 \r"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseProps(data, "fuzz")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		// Every parsed key appears in the input.
		for k := range p {
			if !bytes.Contains(data, []byte(k)) {
				t.Fatalf("key %q not in input", k)
			}
		}
	})
}

// archive writes the files of fsys under prefix as "-- name --" sections,
// the format FuzzRead decodes.
func archive(t testing.TB, fsys fs.FS, only func(string) bool) []byte {
	var names []string
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && only(p) {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("-- " + n + " --\n")
		b.Write(data)
	}
	return b.Bytes()
}

// unarchive turns "-- name --" sections into an in-memory tree. Names are
// cleaned so that fstest.MapFS accepts them.
func unarchive(data []byte) fstest.MapFS {
	m := fstest.MapFS{}
	var name string
	var body bytes.Buffer
	flush := func() {
		if name != "" {
			m[name] = &fstest.MapFile{Data: bytes.Clone(body.Bytes())}
		}
		body.Reset()
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		s := strings.TrimRight(string(line), "\n")
		if strings.HasPrefix(s, "-- ") && strings.HasSuffix(s, " --") && len(s) >= 6 {
			flush()
			name = path.Clean("/" + s[3:len(s)-3])[1:]
			if name == "" || !fs.ValidPath(name) {
				name = ""
			}
			continue
		}
		body.Write(line)
	}
	flush()
	// A file may not also be a directory: drop files that are parents.
	for n := range m {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			delete(m, d)
		}
	}
	return m
}

func FuzzRead(f *testing.F) {
	small := archive(f, smallTree(), func(string) bool { return true })
	f.Add(small)
	f.Add(archive(f, os.DirFS(testutil.Testdata(f, "kfd", "procs")), func(p string) bool { return !strings.HasSuffix(p, ".md") }))
	f.Add(archive(f, os.DirFS(testutil.KFD(f, "topology-parsing")), func(p string) bool {
		return strings.HasPrefix(p, "topology/nodes/") && !strings.Contains(p, "/caches/")
	}))
	f.Add(bytes.Replace(small, []byte("node_to 2"), []byte("node_to 7"), 1))
	f.Add(bytes.Replace(small, []byte("flags 1"), []byte("flags 0"), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := unarchive(data)
		m, err := Read(fsys, func(string, ...any) {})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Read gave an invalid model: %v", err)
		}
		for i, d := range m.Devices {
			if d.RuntimeIndex != i {
				t.Fatalf("device %d has runtime index %d", i, d.RuntimeIndex)
			}
		}
		if err := ReadProcs(fsys, m); err == nil {
			if err := m.Validate(); err != nil {
				t.Fatalf("ReadProcs broke the model: %v", err)
			}
		}
	})
}
