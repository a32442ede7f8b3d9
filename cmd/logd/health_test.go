package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHealthCommand: logd health exits 0 only when the node answers 200,
// asks an every-interface address on loopback and sends the token.
func TestHealthCommand(t *testing.T) {
	status := http.StatusOK
	var gotAuth, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.Path
		w.WriteHeader(status)
		io.WriteString(w, "not ready: no leader")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":"):]
	tokenFile := writeConfig(t, "logd_x.secret\n")
	health := func(env map[string]string, args ...string) (string, error) {
		var out bytes.Buffer
		root := newRootCmd(func(k string) string { return env[k] }, &out, io.Discard, nil)
		root.SetArgs(append([]string{"health"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	if out, err := health(nil, "--addr", srv.URL, "--token-file", tokenFile); err != nil || !strings.Contains(out, "200 OK") || gotAuth != "Bearer logd_x.secret" || gotPath != "/readyz" {
		t.Fatalf("ready: %v, %q, auth %q, path %q", err, out, gotAuth, gotPath)
	}
	if _, err := health(map[string]string{"LOGD_LISTEN": "0.0.0.0" + port}, "--path", "/healthz"); err != nil || gotPath != "/healthz" {
		t.Fatalf("LOGD_LISTEN on every interface: %v, path %q", err, gotPath)
	}
	status = http.StatusServiceUnavailable
	if _, err := health(nil, "--addr", srv.URL); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("not ready: %v", err)
	}
	if _, err := health(nil, "--addr", srv.URL, "--path", "/metrics"); err == nil || !strings.Contains(err.Error(), "--path") {
		t.Fatalf("bad path: %v", err)
	}
}
