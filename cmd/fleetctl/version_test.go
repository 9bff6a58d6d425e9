package main

import (
	"runtime/debug"
	"testing"
)

func TestTheVersionIsTheLinkedOneElseWhatTheGoBuildRecorded(t *testing.T) {
	vcs := func(revision, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: revision}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "5d871949ffb124e120bd59fc182d7fe16de5422c"
	for _, tc := range []struct {
		name   string
		linked string
		info   *debug.BuildInfo
		want   string
	}{
		{"make fleetctl's linked version wins", "v1.4.0-3-g5d87194", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "v1.4.0-3-g5d87194"},
		{"go build of a clean clone says its commit", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201003000-5d871949ffb1"}, Settings: vcs(rev, "false")}, "5d871949ffb1"},
		{"go build with uncommitted changes says so", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201003000-5d871949ffb1+dirty"}, Settings: vcs(rev, "true")}, "5d871949ffb1-dirty"},
		{"a build before Go stamped module versions", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "5d871949ffb1"},
		{"go install of a release says the release", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"a clean clone at a release tag says the release", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: vcs(rev, "false")}, "v1.4.0"},
		{"go install of a commit says its pseudo-version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.1-0.20261201003000-5d871949ffb1"}}, "v1.4.1-0.20261201003000-5d871949ffb1"},
		{"a build without version control says dev", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build information says dev", "dev", nil, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.linked, tc.info); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
