package main

import (
	"runtime/debug"
	"strings"
)

// versionString describes this binary: the module version (or the one set
// with -ldflags "-X main.version=..."), and the VCS revision, commit time
// and modified flag that go build records, as debug.ReadBuildInfo reports
// them.
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	return formatVersion(version, info)
}

// formatVersion renders ldVersion (main.version) and info:
// "v1.2.0 (revision 4f4676a0c1d2, 2026-11-30T03:00:00Z, modified; go1.26)".
func formatVersion(ldVersion string, info *debug.BuildInfo) string {
	v := ldVersion
	if v == "" || v == "dev" {
		v = info.Main.Version
	}
	if v == "" {
		v = "(unknown)"
	}
	var rev, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var details []string
	if rev != "" {
		details = append(details, "revision "+rev)
	} else {
		details = append(details, "no VCS revision recorded")
	}
	if at != "" {
		details = append(details, at)
	}
	if modified {
		details = append(details, "modified")
	}
	d := strings.Join(details, ", ")
	if info.GoVersion != "" {
		d += "; " + info.GoVersion
	}
	return v + " (" + d + ")"
}
