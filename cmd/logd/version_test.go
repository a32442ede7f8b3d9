package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/internal/buildinfo"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestVersionCommands: logd version (text and JSON) and --version print
// the build information, and logd_build_info carries it in its labels.
func TestVersionCommands(t *testing.T) {
	info := buildinfo.Read()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args: []string{"version"}, want: "logd " + info.Version + "\ncommit:     " + info.Commit + "\n"},
		{args: []string{"--version"}, want: "logd " + info.String() + "\n"},
		{args: []string{"-version"}, want: "logd " + info.String() + "\n"},
	} {
		var out bytes.Buffer
		root := newRootCmd(noEnv, &out, io.Discard, nil)
		root.SetArgs(defaultToRun(root, tc.args))
		if err := root.Execute(); err != nil || !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("%v: %v, %q, want %q", tc.args, err, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	root := newRootCmd(noEnv, &out, io.Discard, nil)
	root.SetArgs([]string{"version", "-o", "json"})
	var got buildinfo.Info
	if err := root.Execute(); err != nil || json.Unmarshal(out.Bytes(), &got) != nil || got != info {
		t.Fatalf("version -o json: %v, %q", err, out.String())
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoGauge(info))
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "logd_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gather: %v, %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || len(labels) != 3 || labels["version"] != info.Version || labels["commit"] != info.Commit || labels["go_version"] != info.GoVersion {
		t.Fatalf("logd_build_info: %v", m)
	}
}

// TestBuildInfoStamped: the linker's version reaches logd version and a
// running node's logd_build_info.
func TestBuildInfoStamped(t *testing.T) {
	out, err := exec.Command(e2e.Logd(), "version", "-o", "json").Output()
	var info buildinfo.Info
	if err != nil || json.Unmarshal(out, &info) != nil || info.Version != e2e.Version {
		t.Fatalf("logd version -o json: %v, %s", err, out)
	}
	nd := e2e.StartNode(t)
	resp, err := http.Get("http://" + nd.Listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := `logd_build_info{commit="` + info.Commit + `",go_version="` + info.GoVersion + `",version="` + e2e.Version + `"} 1`
	if !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %s", want)
	}
}
