package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/syncbuf"
)

// syncBuffer is a bytes.Buffer safe for the drawing goroutine and the test.
type syncBuffer = syncbuf.Buffer

// TestProgressNotATerminal: into a file or pipe, progress writes whole
// lines, never a carriage return, and a last line with the final counts.
func TestProgressNotATerminal(t *testing.T) {
	var out syncBuffer
	p := newProgress(&out, true, 100, "records")
	if p.tty || p.interval != plainProgressInterval {
		t.Fatalf("a buffer taken for a terminal: tty %v, interval %v", p.tty, p.interval)
	}
	p.interval = time.Millisecond
	p.Start()
	p.Add(40, 40, 4<<10)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "40 records") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	p.Add(60, 60, 6<<10)
	p.Stop()
	got := out.String()
	if strings.Contains(got, "\r") || strings.Contains(got, "\x1b") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("not plain lines: %q", got)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "40 records  4.0 KiB") {
		t.Fatalf("no periodic line before the end: %q", got)
	}
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^\[=+\] 100%  100 records  10\.0 KiB  \d+ records/s  \S+$`).MatchString(last) {
		t.Fatalf("last line %q", last)
	}
}

// TestProgressTerminal: on a terminal the line is redrawn in place and
// ended at Stop; a report that counts no bytes shows none.
func TestProgressTerminal(t *testing.T) {
	var out syncBuffer
	p := newProgress(&out, true, 0, "records")
	p.tty, p.interval = true, time.Millisecond // as newProgress sets them on a terminal
	p.Start()
	p.Add(1, 1, 0)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "1 records") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	p.Stop()
	got := out.String()
	if !regexp.MustCompile(`^(\r1 records  \d+ records/s  \S+\x1b\[K)+\n$`).MatchString(got) {
		t.Fatalf("frames %q", got)
	}
	if strings.Contains(got, " B ") {
		t.Fatalf("bytes shown although none were counted: %q", got)
	}
}

// TestProgressOffStaysSilent: a report not enabled writes nothing.
func TestProgressOffStaysSilent(t *testing.T) {
	var out syncBuffer
	p := newProgress(&out, false, 10, "records")
	p.Start()
	p.Add(10, 10, 10)
	p.Stop()
	if out.String() != "" {
		t.Fatalf("wrote %q", out.String())
	}
}
