package histcheck

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestRecheckSameVerdict saves failing and passing histories and checks
// that the loaded copy gets the same verdicts, word for word.
func TestRecheckSameVerdict(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	valid := genLog(rng, genConfig{clients: 4, calls: 30, partitions: 2, read: 0.4, keyed: 0.3, failed: 0.05, unknown: 0.1, scan: true})
	broken := append([]Op(nil), valid...)
	if !mutateStaleRead(rng, broken) {
		t.Fatal("no read to break")
	}
	broken = append(broken, numbered(
		commitOp(1, 10, 20, OK, "m1", 1, 40),
		fetchOp(2, "n2", true, 30, 40, 39),
		claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
		claimOp(2, 50, 60, delivery(0, "a2", 2, 200)),
	)...)
	for i := range broken {
		broken[i].ID = i
	}
	for _, tc := range []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"valid", valid, true},
		{"broken", broken, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := CheckAll(tc.ops, Options{})
			if AllOK(before) != tc.ok {
				t.Fatalf("AllOK = %v, want %v:\n%s", AllOK(before), tc.ok, Report(before))
			}
			var buf bytes.Buffer
			if err := Save(&buf, tc.ops); err != nil {
				t.Fatal(err)
			}
			loaded, err := Load(&buf)
			if err != nil {
				t.Fatal(err)
			}
			after := CheckAll(loaded, Options{})
			if Report(before) != Report(after) {
				t.Fatalf("verdicts differ after Save and Load:\nbefore:\n%s\nafter:\n%s", Report(before), Report(after))
			}
			t.Logf("\n%s", Report(after))
		})
	}
}
