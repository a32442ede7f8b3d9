package e2e

import (
	"os/exec"
	"testing"
	"time"
)

// TestProcExited: a child that runs is not exited; one that ended and
// was not waited for (a zombie) is.
func TestProcExited(t *testing.T) {
	if !procfs() {
		t.Skip("no /proc here")
	}
	running := exec.Command("sleep", "30")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { running.Process.Kill(); running.Wait() }()
	if procExited(running.Process.Pid) {
		t.Fatal("a running child reads as exited")
	}
	ended := exec.Command("true")
	if err := ended.Start(); err != nil {
		t.Fatal(err)
	}
	defer ended.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for !procExited(ended.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("a child that ended does not read as exited after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
