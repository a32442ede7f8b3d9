package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCLIUserSCRAM sets, lists and deletes SCRAM credentials; bad input
// is a usage error before any call, a mechanism the node does not know
// its refusal, and a delete of nothing NOT_FOUND.
func TestCLIUserSCRAM(t *testing.T) {
	srv, boot := secureNode(t, nil)
	admin := map[string]string{"LOGCTL_TOKEN": boot}
	pw := filepath.Join(t.TempDir(), "alice.pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.pw")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const when = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	runSecScript(t, srv, []secStep{
		{args: "user scram set alice --mechanism SCRAM-SHA-512 --password-file " + pw, env: admin,
			stdout: []string{`^set SCRAM-SHA-512 credential of alice \(4096 iterations\)\n$`}},
		{args: "user scram set alice --mechanism scram-sha-256 --iterations 8192 --password-file " + pw + " -o json", env: admin,
			stdout: []string{`"mechanism": "SCRAM-SHA-256"`, `"iterations": 8192`, `"set_by": "User:admin"`}},
		{args: "user scram list", env: admin, stdout: []string{
			`(?m)^USER\s+MECHANISM\s+ITERATIONS\s+SET\s+SET BY$`,
			`(?m)^alice\s+SCRAM-SHA-256\s+8192\s+` + when + `\s+User:admin$`,
			`(?m)^alice\s+SCRAM-SHA-512\s+4096\s+` + when + `\s+User:admin$`}},
		{args: "user scram list --user bob -o json", env: admin, stdout: []string{`^\[\]\n$`}},
		{args: "user scram set bob --mechanism SCRAM-SHA-1 --password-file " + pw, env: admin, wantCode: 1, stderr: []string{`unknown mechanism`}},
		{args: "user scram set bob --mechanism SCRAM-SHA-256 --iterations 100 --password-file " + pw, env: admin, wantCode: 2,
			calls: map[string]int{"SetScramCredential": 0}, stderr: []string{`--iterations 100: want 4096 to 16384`}},
		{args: "user scram set bob --mechanism SCRAM-SHA-256 --password-file " + empty, env: admin, wantCode: 2,
			calls: map[string]int{"SetScramCredential": 0}, stderr: []string{`empty password`}},
		{args: "user scram set bob --mechanism SCRAM-SHA-256", env: admin, wantCode: 2, stderr: []string{`required flag\(s\) "password-file" not set`}},
		{args: "user scram delete alice --mechanism SCRAM-SHA-256", env: admin, stdout: []string{`^deleted SCRAM-SHA-256 credential of alice\n$`}},
		{args: "user scram delete alice --mechanism SCRAM-SHA-256", env: admin, wantCode: 3, stderr: []string{`unknown SCRAM credential`}},
		{args: "user scram list -o json", env: admin, stdout: []string{`(?s)^\[\s*\{\s*"user": "alice",\s*"mechanism": "SCRAM-SHA-512",[^{]*\}\s*\]\n$`}},
	})
}
