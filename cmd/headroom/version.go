package main

import (
	"runtime/debug"
	"strings"
)

// versionString is headroom's version as --version and every summary show
// it: the version set at build time (-ldflags -X main.version=...), else
// the module version from the build info, then the commit it was built
// from ("+dirty" when the tree had changes) and the Go toolchain.
func versionString(set string, info *debug.BuildInfo, ok bool) string {
	v := set
	var commit, dirty, goVersion string
	if ok && info != nil {
		if v == "" || v == "dev" {
			if mv := info.Main.Version; mv != "" && mv != "(devel)" {
				v = mv
			}
		}
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	var extra []string
	if commit != "" {
		extra = append(extra, "commit "+commit[:min(len(commit), 12)]+dirty)
	}
	if goVersion != "" {
		extra = append(extra, goVersion)
	}
	if len(extra) == 0 {
		return v
	}
	return v + " (" + strings.Join(extra, ", ") + ")"
}

// fullVersion is this binary's versionString.
func fullVersion() string {
	info, ok := debug.ReadBuildInfo()
	return versionString(version, info, ok)
}
