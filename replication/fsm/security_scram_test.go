package fsm

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// scramCred derives a credential (PBKDF2 at the minimum iterations).
func scramCred(t *testing.T, m auth.SCRAMMechanism, user, pw string) auth.SCRAMCredential {
	t.Helper()
	c, err := auth.SCRAMCredentialFromSalted(m, user, pw, []byte("salt-"+user), auth.MinSCRAMIterations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSCRAMApplySnapshot: credentials are set (replacing the user's of the
// same mechanism), listed without keys, deleted; a delete of none is
// ErrUnknownSCRAM and a bad payload is refused by Apply without stopping
// the node; a snapshot restores them all, and a damaged one is refused.
// Both kinds need SCRAMLevel.
func TestSCRAMApplySnapshot(t *testing.T) {
	must := mustEncode(t)
	f, fatals := testFSM(t, t.TempDir())
	a256 := scramCred(t, auth.SCRAMSHA256, "alice", "one")
	a256b := scramCred(t, auth.SCRAMSHA256, "alice", "two")
	a512 := scramCred(t, auth.SCRAMSHA512, "alice", "one")
	b512 := scramCred(t, auth.SCRAMSHA512, "bob", "pw")
	res := f.ApplyBatch(entries(
		must(EncodeSCRAMSet(secNow, a256, "User:admin")),
		must(EncodeSCRAMSet(secNow, a512, "User:admin")),
		must(EncodeSCRAMSet(secNow, b512, "User:admin")),
		must(EncodeSCRAMSet(secNow, a256b, "User:admin")),
		must(EncodeSCRAMDelete(secNow, "bob", auth.SCRAMSHA256)),
		rawCommand(CmdSCRAMSet, secNow, `{"credential":{"user":"x"},"set_by":"User:admin","set_ms":1}`),
	))
	if err, _ := res[4].(error); !errors.Is(err, backend.ErrUnknownSCRAM) {
		t.Fatalf("delete of a credential bob does not hold: %v", res[4])
	}
	if err, _ := res[5].(error); !errors.Is(err, backend.ErrInvalidArgument) || !errors.Is(err, auth.ErrInvalidSCRAM) {
		t.Fatalf("bad payload: %v", res[5])
	}
	if c, ok := f.SCRAMCredential("alice", auth.SCRAMSHA256); !ok || !reflect.DeepEqual(c, a256b) {
		t.Fatalf("alice's SHA-256 credential %+v, not the second one set", c)
	}
	want := []backend.SCRAMInfo{
		{User: "alice", Mechanism: "SCRAM-SHA-256", Iterations: 4096, SetBy: "User:admin", SetMs: secNowMs},
		{User: "alice", Mechanism: "SCRAM-SHA-512", Iterations: 4096, SetBy: "User:admin", SetMs: secNowMs},
		{User: "bob", Mechanism: "SCRAM-SHA-512", Iterations: 4096, SetBy: "User:admin", SetMs: secNowMs},
	}
	if got := f.SCRAMCredentials(); !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %+v, want %+v", got, want)
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	raw := persist(t, snap).String()
	f2, _ := testFSM(t, t.TempDir())
	if err := f2.Restore(strings.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f2.SCRAMCredentials(), want) {
		t.Fatalf("restored %+v", f2.SCRAMCredentials())
	}
	if c, ok := f2.SCRAMCredential("bob", auth.SCRAMSHA512); !ok || !c.CheckPassword("pw") {
		t.Fatal("bob's password does not check after the restore")
	}
	damaged := strings.Replace(raw, `"iterations":4096`, `"iterations":4095`, 1)
	if err := f2.Restore(strings.NewReader(damaged)); err == nil {
		t.Fatal("a credential of 4095 iterations restored")
	}
	if _, ok := f2.SCRAMCredential("bob", auth.SCRAMSHA512); !ok {
		t.Fatal("a refused restore changed the credentials")
	}

	f.ApplyBatch(entries(must(EncodeSCRAMDelete(secNow, "bob", auth.SCRAMSHA512))))
	if _, ok := f.SCRAMCredential("bob", auth.SCRAMSHA512); ok {
		t.Fatal("bob's credential survived its delete")
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}

	for name, data := range map[string][]byte{
		"scram-set":    must(EncodeSCRAMSet(secNow, a256, "User:admin")),
		"scram-delete": must(EncodeSCRAMDelete(secNow, "alice", auth.SCRAMSHA256)),
	} {
		level, kind, err := EntryLevel(sealEntry(data))
		if err != nil || level != SCRAMLevel || kind != name {
			t.Errorf("%s: level %d, kind %s, %v", name, level, kind, err)
		}
	}
	if _, err := EncodeSCRAMSet(secNow, auth.SCRAMCredential{User: "x"}, "User:admin"); !errors.Is(err, auth.ErrInvalidSCRAM) {
		t.Errorf("encode of a bad credential: %v", err)
	}
}
