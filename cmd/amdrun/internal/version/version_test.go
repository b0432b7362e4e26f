package version

import (
	"runtime/debug"
	"testing"
)

// TestFromBuild covers each source of the version, in order: the stamp,
// the module version the go command recorded, the VCS revision, "dev".
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
		{"stamped wins", "v0.1.0-5-gabc1234", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "v0.1.0-5-gabc1234"},
		{"go install @version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}, Settings: vcs(rev, "false")}, "v0.2.0"},
		{"pseudo-version from a checkout", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201214500-86aa27d1b2c3+dirty"}}, "v0.0.0-20261201214500-86aa27d1b2c3+dirty"},
		{"devel, clean tree", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "devel 86aa27d1b2c3"},
		{"devel, modified tree", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "devel 86aa27d1b2c3-dirty"},
		{"short revision kept whole", "", &debug.BuildInfo{Settings: vcs("abc", "")}, "devel abc"},
		{"no vcs stamp", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build info", "", nil, "dev"},
	} {
		if got := FromBuild(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: FromBuild = %q, want %q", tc.name, got, tc.want)
		}
	}
}
