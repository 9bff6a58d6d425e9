package main

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// version is set at build time (-ldflags "-X main.version=..."), as make
// fleetctl and make release do; buildVersion falls back on what the Go
// toolchain recorded when nothing was linked.
var version = "dev"

// buildVersion is fleetctl's version: the one linked in, else the one of
// the Go build (go install, go build), else "dev".
func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(version, info)
}

// pseudoVersion matches the tail of a Go pseudo-version
// (v0.0.0-20261201003000-5d871949ffb1): a commit, not a release.
var pseudoVersion = regexp.MustCompile(`-(?:0\.)?\d{14}-[0-9a-f]{12}$`)

// versionOf words a build's version. A linked version wins. Then a
// released module version (go install ...@v1.4.0, or a build of a tagged
// clean clone); then the commit the Go toolchain stamped from the clone
// (its first 12 hex digits, as in Go's pseudo-versions, and -dirty with
// uncommitted changes, as git describe says); then any module version (a
// pseudo-version: go install ...@commit). Without any, "dev".
func versionOf(linked string, info *debug.BuildInfo) string {
	if linked != "dev" && linked != "" {
		return linked
	}
	if info == nil {
		return "dev"
	}
	module := info.Main.Version
	if module == "(devel)" {
		module = ""
	}
	if module != "" && !strings.HasSuffix(module, "+dirty") && !pseudoVersion.MatchString(module) {
		return module
	}
	var revision string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision != "" {
		v := revision[:min(len(revision), 12)]
		if modified {
			v += "-dirty"
		}
		return v
	}
	if module != "" {
		return module
	}
	return "dev"
}
