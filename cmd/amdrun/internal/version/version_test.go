package version

import (
	"runtime/debug"
	"testing"
)

// TestFromBuild covers each source of the version, in order: the stamp,
// the module version the go command recorded, Release with the VCS
// revision, Release+dev.
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
		{"pre-release pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1-0.20261201214500-86aa27d1b2c3+dirty"}, Settings: vcs(rev, "true")}, Release + "+g86aa27d1b2c3.dirty"},
		{"checkout at a tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.5.0-rc.1"}, Settings: vcs(rev, "false")}, "0.5.0-rc.1"},
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
