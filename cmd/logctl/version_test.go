package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/logd-dev/logd/internal/buildinfo"
)

// TestVersion: logctl version and --version need no server.
func TestVersion(t *testing.T) {
	info := buildinfo.Read()
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args: []string{"version"}, want: "logctl " + info.Version + "\ncommit:     " + info.Commit + "\n"},
		{args: []string{"--version"}, want: "logctl " + info.String() + "\n"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"--server", "127.0.0.1:1"}, tc.args...), nil, &out, &errOut, noEnv); code != exitOK || !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("%v: exit %d, %q (%s), want %q", tc.args, code, out.String(), errOut.String(), tc.want)
		}
	}
	var out bytes.Buffer
	var got buildinfo.Info
	if code := run(context.Background(), []string{"version", "-o", "json"}, nil, &out, &out, noEnv); code != exitOK || json.Unmarshal(out.Bytes(), &got) != nil || got != info {
		t.Fatalf("version -o json: exit %d, %q", code, out.String())
	}
}
