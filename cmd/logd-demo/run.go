package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/logd-dev/logd/client"
)

// config is what main passes to run.
type config struct {
	logd    string // binary; "" builds one
	verbose bool   // print logd's log when a story fails
}

// demo carries what the stories share and counts failed observations.
type demo struct {
	out    io.Writer
	c      *client.Client
	srv    *server
	failed []string
}

// story is one part of the walk-through. It returns an error when it
// cannot go on; failed observations are counted by check.
type story struct {
	title string
	run   func(ctx context.Context, d *demo) error
}

var stories = []story{
	{"1. Consumer groups: billing and analytics replay the same orders independently", storyGroups},
	{"2. A credit job whose worker crashes after its effect, before its ack", storyCredit},
	{"3. A stale ack refused after its lease expired", storyStaleAck},
	{"4. A poison job dead-lettered while the jobs behind it complete; then a redrive", storyPoison},
	{"5. A burst refused by admission control, accepted after draining", storyAdmission},
	{"6. A produce retried after an ambiguous failure returns the original offset", storyAmbiguous},
	{"7. Effectively once: an order service's outbox and a billing worker's inbox, killed at random points", storyOutbox},
}

// run starts logd in a temporary directory, runs every story and removes
// everything it created. It fails if any observation failed.
func run(ctx context.Context, out io.Writer, cfg config) error {
	dir, err := os.MkdirTemp("", "logd-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := cfg.logd
	if bin == "" {
		fmt.Fprintln(out, "building logd ...")
		if bin, err = buildLogd(ctx, dir); err != nil {
			return err
		}
	}
	srv, err := startServer(ctx, bin, dir)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(out, "logd is running at %s (data in %s)\n", srv.addr, filepath.Join(dir, "data"))

	c, err := client.New(srv.addr, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	d := &demo{out: out, c: c, srv: srv}
	start := time.Now()
	for _, s := range stories {
		fmt.Fprintf(out, "\n== %s\n", s.title)
		before := len(d.failed)
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := s.run(sctx, d)
		cancel()
		if err != nil {
			d.fail("%s: %v", s.title, err)
		}
		if cfg.verbose && len(d.failed) > before {
			b, _ := os.ReadFile(srv.logs.Name())
			fmt.Fprintf(out, "--- logd output (tail)\n%s\n---\n", tail(string(b), 3000))
		}
	}
	fmt.Fprintf(out, "\n%d stories in %v\n", len(stories), time.Since(start).Round(time.Millisecond))
	if len(d.failed) > 0 {
		return fmt.Errorf("%d observation(s) failed:\n  %s", len(d.failed), strings.Join(d.failed, "\n  "))
	}
	fmt.Fprintln(out, "every observation held")
	return nil
}

// say prints a line of narration.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "   "+format+"\n", args...)
}

// check prints an observation and counts it when it does not hold.
func (d *demo) check(ok bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if ok {
		fmt.Fprintf(d.out, "   ok   %s\n", msg)
		return
	}
	d.fail("%s", msg)
}

func (d *demo) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(d.out, "   FAIL %s\n", msg)
	d.failed = append(d.failed, msg)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// values returns the records' values as strings.
func values(rs []client.FetchedRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

// header returns a record header's value.
func header(hs []client.Header, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
