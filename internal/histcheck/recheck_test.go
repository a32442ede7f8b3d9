package histcheck

import (
	"flag"
	"testing"
)

var (
	historyFlag   = flag.String("history", "", "a history file (Save's JSON lines) for TestRecheck to check")
	visualizeFlag = flag.String("visualize", "", "with -history: a directory for porcupine's visualization of partitions that are not linearizable")
)

// TestRecheck checks a saved history offline, with the same checkers and
// options a run uses by default:
//
//	go test ./internal/histcheck -run TestRecheck -args -history FILE
//
// It prints every verdict and fails if one is not OK. Without -history it
// is skipped.
func TestRecheck(t *testing.T) {
	if *historyFlag == "" {
		t.Skip("no -history file given")
	}
	ops, err := LoadFile(*historyFlag)
	if err != nil {
		t.Fatal(err)
	}
	vs := CheckAll(ops, Options{VisualizeDir: *visualizeFlag})
	t.Logf("%d calls from %s\n%s", len(ops), *historyFlag, Report(vs))
	if !AllOK(vs) {
		t.Fail()
	}
}
