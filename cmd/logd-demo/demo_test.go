package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the whole walk-through against a freshly built logd, as
// `make demo` does. It takes a few seconds once the build is cached; -short
// skips it.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo builds and runs a real logd")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bin, err := buildLogd(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, &out, config{logd: bin, verbose: true}); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "every observation held") {
		t.Fatalf("demo output:\n%s", out.String())
	}
	if testing.Verbose() {
		os.Stdout.Write(out.Bytes())
	}
}
