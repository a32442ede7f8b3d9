package fsm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestNodeRegisterAddresses: a registration's peer and Kafka addresses
// are optional fields of the same payload version. A payload without them
// (every build before them) decodes as before and leaves them empty; one
// with them applies them, and a snapshot keeps them; a build that predates
// them reads the new payload as the registration it knows. Segment
// catch-up calls a node at its peer address when it has one.
func TestNodeRegisterAddresses(t *testing.T) {
	old := append(encodeHeader(nil, CmdNodeRegister, 1), `{"id":"old","api_address":"old:7070","feature_level":3}`...)
	if again := mustJSON(t, CmdNodeRegister, 1, NodeRegister{ID: "old", APIAddress: "old:7070", FeatureLevel: 3}); string(again) != string(old) {
		t.Fatalf("a registration without the new fields encodes as\n%s\nnot\n%s", again, old)
	}
	reg := NodeRegister{ID: "new", APIAddress: "new:7070", FeatureLevel: Level, PeerAddress: "10.0.0.2:7072", KafkaAddress: "new.example:19092"}
	cur := mustJSON(t, CmdNodeRegister, 2, reg)
	for _, field := range []string{`"peer_address":"10.0.0.2:7072"`, `"kafka_address":"new.example:19092"`} {
		if !strings.Contains(string(cur), field) {
			t.Fatalf("payload %s lacks %s", cur[cmdHeaderSize:], field)
		}
	}

	// A build before the fields decodes the payload with encoding/json
	// into the registration it knows: the fields are ignored, the rest is
	// as written, so it applies the entry as this build does.
	var before struct {
		ID           string       `json:"id"`
		APIAddress   string       `json:"api_address"`
		FeatureLevel FeatureLevel `json:"feature_level,omitempty"`
	}
	if err := json.Unmarshal(cur[cmdHeaderSize:], &before); err != nil || before.ID != reg.ID || before.APIAddress != reg.APIAddress || before.FeatureLevel != reg.FeatureLevel {
		t.Fatalf("as an older build reads it: %+v, %v", before, err)
	}

	f, fatals := testFSM(t, t.TempDir())
	f.ApplyBatch(entries(old, cur))
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
	want := map[string]RegisteredNode{
		"old": {ID: "old", APIAddress: "old:7070", FeatureLevel: 3},
		"new": {ID: "new", APIAddress: "new:7070", FeatureLevel: Level, PeerAddress: "10.0.0.2:7072", KafkaAddress: "new.example:19092"},
	}
	check := func(what string, f *FSM) {
		t.Helper()
		for id, w := range want {
			if got, ok := f.Node(id); !ok || got != w {
				t.Errorf("%s: node %s is %+v, %v; want %+v", what, id, got, ok, w)
			}
		}
		if got, want := f.peers(), []string{"10.0.0.2:7072", "old:7070"}; !slices.Equal(got, want) {
			t.Errorf("%s: catch-up calls %v; want %v (the peer address where there is one)", what, got, want)
		}
	}
	check("applied", f)
	if got := want["old"].CallAddress(); got != "old:7070" {
		t.Errorf("a node without a peer address is called at %q", got)
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := testFSM(t, t.TempDir())
	if err := f2.Restore(persist(t, snap)); err != nil {
		t.Fatal(err)
	}
	check("restored", f2)

	// Registering again without the addresses (the node restarted without
	// --peer-listen and its Kafka listener) forgets them.
	f2.ApplyBatch([]Entry{{Index: 10, Command: true, Data: mustJSON(t, CmdNodeRegister, 3, NodeRegister{ID: "new", APIAddress: "new:7070", FeatureLevel: Level})}})
	if got, _ := f2.Node("new"); got.PeerAddress != "" || got.KafkaAddress != "" || got.CallAddress() != "new:7070" {
		t.Errorf("re-registered without addresses: %+v", got)
	}
}
