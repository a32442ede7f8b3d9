// Package buildinfo says which build of logd is running: the module
// version, the commit and its date, and the Go version, for logd version,
// logctl version, --version and the logd_build_info metric.
//
// The values come from the binary's embedded build information
// (runtime/debug.ReadBuildInfo: the main module's version and the
// vcs.revision, vcs.time and vcs.modified settings the go command records
// when it builds inside a repository with -buildvcs on). A release build
// overrides them with the linker:
//
//	go build -ldflags "-X github.com/logd-dev/logd/internal/buildinfo.version=v1.2.0 \
//	  -X github.com/logd-dev/logd/internal/buildinfo.commit=$(git rev-parse HEAD) \
//	  -X github.com/logd-dev/logd/internal/buildinfo.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// (make release does). A build with neither reports version "(devel)" and
// commit and date "unknown".
package buildinfo

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by -ldflags -X at release builds; the linker can only set package
// string variables, which is why these are not constants. Nothing else
// writes them.
var (
	version string
	commit  string
	date    string
)

// unknown stands for a value the build did not record.
const unknown = "unknown"

// Info describes a build.
type Info struct {
	// Version is the module version (v1.2.0), or "(devel)" for a build
	// from a working tree without a version.
	Version string `json:"version"`
	// Commit is the VCS revision, "+dirty" appended when the working tree
	// had changes; "unknown" when not recorded.
	Commit string `json:"commit"`
	// Date is the commit's time (or the release build's), RFC 3339;
	// "unknown" when not recorded.
	Date string `json:"date"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Read returns the running binary's build information, the linker's
// values first.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuild(bi, ok, version, commit, date)
}

// fromBuild merges the build information bi (ok: present) with the
// linker's values v, c and d, which win where set.
func fromBuild(bi *debug.BuildInfo, ok bool, v, c, d string) Info {
	info := Info{Version: "(devel)", Commit: unknown, Date: unknown, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if ok {
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.Date = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && info.Commit != unknown {
			info.Commit += "+dirty"
		}
	}
	for _, o := range []struct {
		dst *string
		v   string
	}{{&info.Version, v}, {&info.Commit, c}, {&info.Date, d}} {
		if o.v = strings.TrimSpace(o.v); o.v != "" {
			*o.dst = o.v
		}
	}
	return info
}

// String is the one-line form that --version prints, after the program's
// name: "v1.2.0 (commit 0123abc, 2026-01-02T03:04:05Z, go1.26.8 linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s, %s %s)", i.Version, shortCommit(i.Commit), i.Date, i.GoVersion, i.Platform)
}

// Text is the multi-line form that the version commands print.
func (i Info) Text(program string) string {
	return fmt.Sprintf("%s %s\ncommit:     %s\ndate:       %s\ngo version: %s\nplatform:   %s\n",
		program, i.Version, i.Commit, i.Date, i.GoVersion, i.Platform)
}

// JSON is the --output json form of the version commands, with a newline.
func (i Info) JSON() []byte {
	b, _ := json.Marshal(i) // strings only: cannot fail
	return append(b, '\n')
}

// shortCommit abbreviates a full revision to 12 characters, keeping a
// "+dirty" mark.
func shortCommit(c string) string {
	rev, dirty, _ := strings.Cut(c, "+")
	if len(rev) > 12 && rev != unknown {
		rev = rev[:12]
	}
	if dirty != "" {
		return rev + "+" + dirty
	}
	return rev
}
