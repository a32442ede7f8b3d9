package buildinfo

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuild(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		ok      bool
		v, c, d string
		want    Info
	}{
		{name: "no build information", want: Info{Version: "(devel)", Commit: unknown, Date: unknown}},
		{name: "devel without vcs", bi: &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"}}, ok: true,
			want: Info{Version: "(devel)", Commit: unknown, Date: unknown, GoVersion: "go1.99.1"}},
		{name: "vcs settings", bi: vcs, ok: true,
			want: Info{Version: "v1.2.3", Commit: "0123456789abcdef0123+dirty", Date: "2026-01-02T03:04:05Z", GoVersion: "go1.99.1"}},
		{name: "linker values win", bi: vcs, ok: true, v: "v9.0.0", c: "feedface", d: "2027-01-01T00:00:00Z",
			want: Info{Version: "v9.0.0", Commit: "feedface", Date: "2027-01-01T00:00:00Z", GoVersion: "go1.99.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuild(tc.bi, tc.ok, tc.v, tc.c, tc.d)
			if tc.want.GoVersion == "" {
				tc.want.GoVersion = got.GoVersion // the running toolchain's
			}
			tc.want.Platform = got.Platform
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	i := fromBuild(vcs, true, "", "", "")
	if s := i.String(); !strings.HasPrefix(s, "v1.2.3 (commit 0123456789ab+dirty, 2026-01-02T03:04:05Z, go1.99.1 ") {
		t.Fatalf("String: %q", s)
	}
	var back Info
	if err := json.Unmarshal(i.JSON(), &back); err != nil || back != i {
		t.Fatalf("JSON round trip: %+v, %v", back, err)
	}
	if txt := i.Text("logd"); !strings.HasPrefix(txt, "logd v1.2.3\ncommit:     0123456789abcdef0123+dirty\n") {
		t.Fatalf("Text: %q", txt)
	}
}
