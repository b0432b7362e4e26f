package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestFromBuild covers each source of the version, in order: the stamp,
// the module version the go command recorded, Release with the VCS revision, Release+dev.
func TestFromBuild(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "86aa27d1b2c3d4e5f60718293a4b5c6d7e8f9012"
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"stamped wins", "0.4.0+gabc1234", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "0.4.0+gabc1234"},
		{"go install @version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}, Settings: vcs(rev, "false")}, "0.2.0"},
		{"pseudo-version from a checkout", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201214500-86aa27d1b2c3+dirty"}, Settings: vcs(rev, "true")}, Release + "+g86aa27d1b2c3.dirty"},
		{"pseudo-version, no vcs stamp", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201214500-86aa27d1b2c3"}}, Release + "+g86aa27d1b2c3"},
		{"pre-release pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1-0.20261201214500-86aa27d1b2c3+dirty"}}, Release + "+g86aa27d1b2c3.dirty"},
		{"a pre-release is no pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.5.0-rc.1"}}, "0.5.0-rc.1"},
		{"devel, clean tree", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, Release + "+g86aa27d1b2c3"},
		{"devel, modified tree", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, Release + "+g86aa27d1b2c3.dirty"},
		{"short revision kept whole", "", &debug.BuildInfo{Settings: vcs("abc", "")}, Release + "+gabc"},
		{"no vcs stamp", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Release + "+dev"},
		{"no build info", "", nil, Release + "+dev"},
	} {
		if got := FromBuild(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: FromBuild = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzPseudoRevision: any string, no panic; a revision found is 12 hex
// digits that the version holds.
func FuzzPseudoRevision(f *testing.F) {
	for _, s := range []string{"v0.0.0-20261201214500-86aa27d1b2c3+dirty", "v0.4.1-0.20261201214500-86aa27d1b2c3", "v0.5.0-rc.1", "(devel)", "", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		rev, _, ok := pseudoRevision(v)
		if ok && (len(rev) != 12 || strings.Trim(rev, "0123456789abcdef") != "" || !strings.Contains(v, rev)) {
			t.Errorf("pseudoRevision(%q) = %q", v, rev)
		}
	})
}
