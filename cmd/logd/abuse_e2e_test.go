package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// Attacks on one node's client port, scripted: a slow-body connection
// flood under a low open-file limit, many large bodies at once, a gzip
// bomb, extreme timestamps, and a topic-creation flood past the quota.
// During each, well-behaved clients keep calling the node and every one
// of their calls must succeed within a generous deadline; the node must
// never exit. Each test logs the victims' latency and the node's memory
// (VmRSS) and file descriptors as it goes: figures to read, not
// assertions (the e2e binary is built with -race, which inflates both).

// startNodeLimited starts a single node whose open-file limit (soft and
// hard) is nofile, through the shell's ulimit, and waits until it leads.
func startNodeLimited(t *testing.T, nofile int, extra ...string) *e2e.Node {
	t.Helper()
	nd := e2e.NewNode(t, "n1", append(e2e.SingleNodeRaft(), extra...)...)
	script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile)
	nd.Cmd = exec.Command("sh", append([]string{"-c", script, e2e.Logd()}, nd.Cmdline("")...)...)
	nd.Cmd.Stdout, nd.Cmd.Stderr = nd.Logs, nd.Logs
	if err := nd.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e2e.WaitFor(t, ctx, "n1 leads", func() bool {
		st, err := nd.Status(ctx)
		return err == nil && st.Ready && st.State == "Leader"
	})
	return nd
}

// procStats reads a process's resident memory (KiB) and open file
// descriptors, and whether it still runs (a zombie does not).
func procStats(pid int) (rssKiB int64, fds int, alive bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	alive = true
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "State:" && (f[1] == "Z" || f[1] == "X"):
			alive = false
		case len(f) >= 2 && f[0] == "VmRSS:":
			rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		fds = len(ents)
	}
	return rssKiB, fds, alive
}

// watcher samples a node every 50 ms while an attack runs: its memory,
// descriptors and liveness, and the largest value seen of some metrics.
type watcher struct {
	nd   *e2e.Node
	stop chan struct{}
	done chan struct{}

	mu                  sync.Mutex
	maxRSS, lastRSS     int64 // KiB
	maxFDs              int
	died                bool
	maxMetric, lastSeen map[string]float64
}

func watch(nd *e2e.Node, metrics ...string) *watcher {
	w := &watcher{nd: nd, stop: make(chan struct{}), done: make(chan struct{}), maxMetric: map[string]float64{}, lastSeen: map[string]float64{}}
	pid := nd.Cmd.Process.Pid
	// One kept-alive connection, so scrapes are not queued behind an
	// attack at the connection cap once it is open.
	hc := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(w.done)
		defer hc.CloseIdleConnections()
		for {
			rss, fds, alive := procStats(pid)
			vals := map[string]float64{}
			if len(metrics) > 0 {
				vals = scrapeSome(hc, "http://"+nd.Listen+"/metrics", metrics)
			}
			w.mu.Lock()
			w.maxRSS, w.lastRSS, w.maxFDs = max(w.maxRSS, rss), rss, max(w.maxFDs, fds)
			w.died = w.died || !alive
			for k, v := range vals {
				w.maxMetric[k] = max(w.maxMetric[k], v)
				w.lastSeen[k] = v
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// max is the largest value of the named metric sampled so far.
func (w *watcher) max(name string) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxMetric[name]
}

// finish stops sampling.
func (w *watcher) finish() {
	close(w.stop)
	<-w.done
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("node RSS max %d MiB (last %d MiB), open fds max %d", w.maxRSS>>10, w.lastRSS>>10, w.maxFDs)
}

// scrapeSome returns the named metrics, each the sum of its samples
// (errors leave them out: a scrape may time out under attack).
func scrapeSome(hc *http.Client, url string, names []string) map[string]float64 {
	out := map[string]float64{}
	resp, err := hc.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if sp < 0 || !slices.Contains(names, name) {
			continue
		}
		if v, err := strconv.ParseFloat(line[sp+1:], 64); err == nil {
			out[name] += v
		}
	}
	return out
}

// victims are well-behaved producers, each through its own client from
// 127.0.0.1, writing small records while an attack runs; every call
// must succeed within the client's generous timeout.
type victims struct {
	mu       sync.Mutex
	lat      []time.Duration
	failures []error
	wg       sync.WaitGroup
	stop     chan struct{}
}

func startVictims(t *testing.T, nd *e2e.Node, topic string, n int) *victims {
	t.Helper()
	v := &victims{stop: make(chan struct{})}
	for i := range n {
		c, err := client.New(nd.Listen, client.Options{Timeout: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		v.wg.Go(func() {
			defer c.Close()
			for n := 0; ; n++ {
				select {
				case <-v.stop:
					return
				default:
				}
				start := time.Now()
				_, err := c.Produce(context.Background(), topic, []client.Record{{Value: fmt.Appendf(nil, "victim-%d-%d-%s", i, n, strings.Repeat("x", 900))}})
				v.mu.Lock()
				if err != nil {
					v.failures = append(v.failures, err)
				} else {
					v.lat = append(v.lat, time.Since(start))
				}
				v.mu.Unlock()
				select {
				case <-v.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
	return v
}

// finish stops the victims and fails the test if a call failed.
func (v *victims) finish(t *testing.T) string {
	t.Helper()
	close(v.stop)
	v.wg.Wait()
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, err := range v.failures {
		if i < 5 {
			t.Errorf("a well-behaved client's call failed during the attack: %v", err)
		}
	}
	if len(v.lat) == 0 {
		t.Errorf("no well-behaved call completed during the attack")
		return "no calls"
	}
	slices.Sort(v.lat)
	q := func(p float64) time.Duration { return v.lat[int(p*float64(len(v.lat)-1))].Round(time.Millisecond) }
	return fmt.Sprintf("victims: %d calls ok, %d failed, latency p50 %v p99 %v max %v", len(v.lat), len(v.failures), q(0.5), q(0.99), q(1))
}

// requireAlive fails the test if the node exited or stopped serving.
func requireAlive(t *testing.T, nd *e2e.Node, w *watcher) {
	t.Helper()
	w.mu.Lock()
	died := w.died
	w.mu.Unlock()
	if _, _, alive := procStats(nd.Cmd.Process.Pid); died || !alive {
		t.Fatal("the node exited during the attack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e2e.WaitFor(t, ctx, "node serves after the attack", func() bool {
		st, err := nd.Status(ctx)
		return err == nil && st.Ready
	})
	if b, err := os.ReadFile(nd.Logs.Name()); err == nil && bytes.Contains(b, []byte("too many open files")) {
		t.Error("the node ran out of file descriptors (its log says: too many open files)")
	}
}

// TestAbuseSlowBodyFlood: thousands of connections, from several
// addresses, each sending a request header and then its body a byte a
// second, against a node whose open-file limit is 1024, while producers
// write to a topic whose segments roll every few records. The connection
// cap (half the limit) keeps descriptors for the segment files, the
// per-address cap keeps one address from holding all of it, and the body
// deadline frees the slots: the node never exits, and every call of the
// producers succeeds. Without the caps and the deadline, the node runs
// out of descriptors and stops at a segment roll (exit 70).
func TestAbuseSlowBodyFlood(t *testing.T) {
	const nofile = 1024
	sources, perSource, attack := 6, 500, 8*time.Second
	if e2e.FaultLong() {
		sources, perSource, attack = 7, 1000, 40*time.Second
	}
	nd := startNodeLimited(t, nofile, "--http-body-timeout", "2s", "--http-read-header-timeout", "2s", "--max-connections-per-ip", "200")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A new segment every quarter second of appends: each roll opens
	// files. (By time, so that the segments, which keep a descriptor
	// each, stay well within the reserve however fast the producers go.)
	e2e.CreateTopic(t, ctx, nd, "victim", 1, map[string]string{"segment.ms": "250"})

	w := watch(nd, "logd_connections_open", "logd_connection_limit_waits_total", "logd_connections_refused_total", "logd_request_body_timeouts_total")
	v := startVictims(t, nd, "victim", 2)
	var opened, cut atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for s := range sources {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+s))}
		for range perSource {
			wg.Go(func() { trickle(nd.Listen, src, stop, &opened, &cut) })
		}
	}
	// The attack lasts at least attack, and then until it has done what
	// it is for: connections queued at the cap, bodies cut at their
	// deadline, segments rolled under it. How fast the sockets open is the
	// machine's business (a busy one opens them slower); what the node
	// does once they are open is the node's.
	segmentFiles := func() []string {
		// In the meta group's directory, or in a data group's.
		m, _ := filepath.Glob(filepath.Join(nd.DataDir, "topics", "victim~*", "0", "*.log"))
		g, _ := filepath.Glob(filepath.Join(nd.DataDir, "groups", "g*", "topics", "victim~*", "0", "*.log"))
		return append(m, g...)
	}
	// The watcher's scrapes give up after 2 s, and on a busy machine every
	// one of them may queue behind the flood at the connection cap; these
	// wait their turn. The counters only grow, so one late answer shows
	// what the node did.
	patient := &http.Client{Timeout: 30 * time.Second}
	defer patient.CloseIdleConnections()
	counters := []string{"logd_connection_limit_waits_total", "logd_request_body_timeouts_total"}
	seen := map[string]float64{}
	reached := func() bool {
		for k, v := range scrapeSome(patient, "http://"+nd.Listen+"/metrics", counters) {
			seen[k] = max(seen[k], v)
		}
		return seen[counters[0]] > 0 && seen[counters[1]] > 0 && len(segmentFiles()) >= 3
	}
	time.Sleep(attack)
	for !reached() && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	vs := v.finish(t)
	w.finish()
	requireAlive(t, nd, w)

	segments := segmentFiles()
	t.Logf("slow-body flood: %d sockets from %d addresses for %v (%d connections made, %d cut by the node); %s; %s; %d segments rolled",
		sources*perSource, sources, attack, opened.Load(), cut.Load(), vs, w, len(segments))
	t.Logf("metrics max: %v", w.maxMetric)
	if len(segments) < 3 {
		t.Errorf("only %d segments: the producers did not roll segments during the flood", len(segments))
	}
	for _, name := range counters {
		if max(seen[name], w.max(name)) == 0 {
			t.Errorf("the flood never reached the connection cap and the body deadline: %s stayed 0 (%v; during the flood %v)", name, seen, w.maxMetric)
		}
	}
}

// trickle is one slow-body attacker: it connects from src, sends a
// Produce header announcing a 1 MB body, then a byte a second, until the
// node closes the connection; then it connects again, until stop. One
// goroutine each (the race detector allows about 8000).
func trickle(addr string, src *net.TCPAddr, stop <-chan struct{}, opened, cut *atomic.Int64) {
	d := net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}
	buf := make([]byte, 512)
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		opened.Add(1)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: logd\r\nContent-Type: application/proto\r\nContent-Length: 1000000\r\n\r\n", logdv1connect.LogServiceProduceProcedure)
	body:
		for {
			select {
			case <-stop:
				c.Close()
				return
			default:
			}
			// Wait a second for the node to answer or close; then send a
			// byte more.
			c.SetReadDeadline(time.Now().Add(time.Second))
			_, err := c.Read(buf)
			var ne net.Error
			switch {
			case err == nil:
				// The node's answer to the cut body; its close follows.
			case errors.As(err, &ne) && ne.Timeout():
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write([]byte{0})
			default:
				cut.Add(1)
				break body
			}
		}
		c.Close()
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// postBody sends a Connect Produce whose body comes from body, declared
// when length >= 0, and returns the HTTP status and response text.
func postBody(ctx context.Context, addr string, body io.Reader, length int64, header http.Header) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+logdv1connect.LogServiceProduceProcedure, body)
	if err != nil {
		return 0, "", err
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/proto")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), nil
}

// pacedProduce is the body of a Produce of records of 1,000,000 bytes
// adding up to about size bytes, written at about 10 MB/s so that
// concurrent ones overlap.
func pacedProduce(t *testing.T, size int) io.Reader {
	t.Helper()
	var recs []*logdv1.Record
	for range size / 1_000_010 {
		recs = append(recs, &logdv1.Record{Value: bytes.Repeat([]byte("b"), 1_000_000)})
	}
	b, err := proto.Marshal(&logdv1.ProduceRequest{Topic: "big", Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		for len(b) > 0 {
			n := min(len(b), 1<<20)
			if _, err := pw.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
			time.Sleep(100 * time.Millisecond)
		}
		pw.Close()
	}()
	return pr
}

// TestAbuseLargeBodies: large request bodies sent at once: 100 MB ones
// declared (Content-Length), and others streamed without a length. The
// declared ones, past the request bound, are refused unread; the streamed
// ones are admitted while they fit the memory budget and refused with
// OVERLOADED past it (or cut at the request bound); the in-flight bytes
// never pass the budget; producers of small records are served throughout.
func TestAbuseLargeBodies(t *testing.T) {
	declared, streamed, size, budget, bound := 1, 3, 20<<20, int64(48<<20), int64(32<<20)
	if e2e.FaultLong() {
		// The defaults.
		declared, streamed, size, budget, bound = 6, 6, 100<<20, 256<<20, 64<<20
	}
	nd := e2e.StartNode(t, "--max-inflight-request-bytes", strconv.FormatInt(budget, 10), "--max-request-bytes", strconv.FormatInt(bound, 10))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "victim", 1, nil)
	e2e.CreateTopic(t, ctx, nd, "big", 1, map[string]string{"max.message.bytes": "67108864"})
	bodies := make([]io.Reader, streamed)
	for i := range bodies {
		bodies[i] = pacedProduce(t, size)
	}

	w := watch(nd, "logd_request_inflight_bytes", "logd_request_budget_refusals_total", "logd_requests_too_large_total")
	v := startVictims(t, nd, "victim", 2)
	type outcome struct {
		declared bool
		status   int
		text     string
		err      error
		took     time.Duration
	}
	out := make([]outcome, declared+streamed)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			start := time.Now()
			o := outcome{declared: i < declared}
			if o.declared {
				const big = 100 << 20
				o.status, o.text, o.err = postBody(ctx, nd.Listen, io.LimitReader(zeros{}, big), big, nil)
			} else {
				o.status, o.text, o.err = postBody(ctx, nd.Listen, bodies[i-declared], -1, nil)
			}
			o.took = time.Since(start)
			out[i] = o
		})
	}
	wg.Wait()
	vs := v.finish(t)
	w.finish()
	requireAlive(t, nd, w)

	overloaded := 0
	for i, o := range out {
		text := o.text
		if o.status == http.StatusOK {
			text = "appended"
		}
		t.Logf("large body %d (declared %v): %d %.100s %v in %v", i, o.declared, o.status, text, o.err, o.took.Round(time.Millisecond))
		switch {
		case o.declared && !strings.Contains(o.text, "larger than this node accepts"):
			t.Errorf("declared body %d past the bound: %d %s %v, want RECORD_TOO_LARGE", i, o.status, o.text, o.err)
		case !o.declared && strings.Contains(o.text, "overloaded"):
			overloaded++
		case !o.declared && o.status != http.StatusOK && !strings.Contains(o.text, "REASON_RECORD_TOO_LARGE"):
			t.Errorf("streamed body %d: %d %s %v", i, o.status, o.text, o.err)
		}
	}
	t.Logf("large bodies: %d declared of 100 MiB, %d streamed of %d MiB, budget %d MiB; in-flight max %.0f MiB; %d refused OVERLOADED; %s; %s",
		declared, streamed, size>>20, budget>>20, w.maxMetric["logd_request_inflight_bytes"]/(1<<20), overloaded, vs, w)
	if got := w.maxMetric["logd_request_inflight_bytes"]; got > float64(budget) {
		t.Errorf("in-flight request bytes reached %.0f, past the budget of %d", got, budget)
	}
	if overloaded == 0 {
		t.Errorf("no streamed body was refused: %d of %d MiB streamed at once fit a budget of %d MiB?", streamed, size>>20, budget>>20)
	}
}

// zeros reads zeros forever.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// gzipBomb is about size>>20 KiB of gzip that inflates to size bytes of
// zeros: members of 1 MiB, concatenated (gzip readers read every member).
func gzipBomb(size int64) []byte {
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	return bytes.Repeat(member.Bytes(), int(size>>20))
}

// TestAbuseGzipBomb: 8 MiB of gzip that inflate to 8 GiB, as a Connect
// body (Content-Encoding) and as a compressed gRPC message: each is
// refused with RECORD_TOO_LARGE once it inflates past the request bound
// (16 MiB here, to keep the test short), without inflating the rest;
// producers are served meanwhile.
func TestAbuseGzipBomb(t *testing.T) {
	nd := e2e.StartNode(t, "--max-request-bytes", strconv.Itoa(16<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "victim", 1, nil)
	bomb := gzipBomb(8 << 30)

	w := watch(nd)
	v := startVictims(t, nd, "victim", 2)
	start := time.Now()
	status, text, err := postBody(ctx, nd.Listen, bytes.NewReader(bomb), int64(len(bomb)), http.Header{"Content-Encoding": {"gzip"}})
	connectTook := time.Since(start)
	if err != nil || !strings.Contains(text, "larger than this node accepts") || !strings.Contains(text, "REASON_RECORD_TOO_LARGE") {
		t.Errorf("Connect gzip bomb: %d %s %v, want RECORD_TOO_LARGE", status, text, err)
	}

	frame := binary.BigEndian.AppendUint32([]byte{1}, uint32(len(bomb)))
	frame = append(frame, bomb...)
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &h2}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+nd.Listen+logdv1connect.LogServiceProduceProcedure, bytes.NewReader(frame))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Grpc-Encoding", "gzip")
	req.Header.Set("Te", "trailers")
	start = time.Now()
	resp, err := hc.Do(req)
	var msg string
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		msg = resp.Trailer.Get("Grpc-Message") + resp.Header.Get("Grpc-Message")
	}
	grpcTook := time.Since(start)
	if err != nil || !strings.Contains(msg, "larger than this node accepts") {
		t.Errorf("gRPC gzip bomb: %q %v, want the request bound's refusal", msg, err)
	}
	vs := v.finish(t)
	w.finish()
	requireAlive(t, nd, w)
	t.Logf("gzip bomb: %d MiB inflating to 8 GiB refused in %v (Connect), %v (gRPC); %s; %s",
		len(bomb)>>20, connectTook.Round(time.Millisecond), grpcTook.Round(time.Millisecond), vs, w)
}

// TestAbuseExtremeTimestamps: record timestamps outside [0, the end of
// year 9999] are refused with INVALID_ARGUMENT and nothing is written;
// the last millisecond of 9999 is accepted, and logctl prints it as JSON.
func TestAbuseExtremeTimestamps(t *testing.T) {
	nd := e2e.StartNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "ts", 1, nil)
	for _, ts := range []int64{1<<63 - 1, 253402300800000, -1, -1 << 63} {
		_, err := nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ts", Records: []*logdv1.Record{
			{Value: []byte("fine")}, {Value: []byte("bad"), TimestampMs: ts},
		}}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || reasonOfErr(err) != logdv1.Reason_REASON_INVALID_ARGUMENT {
			t.Fatalf("timestamp %d: %v, want INVALID_ARGUMENT", ts, err)
		}
	}
	offs, err := nd.RPC.ListOffsets(ctx, connect.NewRequest(&logdv1.ListOffsetsRequest{Topic: "ts"}))
	if err != nil {
		t.Fatal(err)
	}
	if offs.Msg.EndOffset != 0 {
		t.Fatalf("refused produces wrote records: end offset %d", offs.Msg.EndOffset)
	}
	const last = 253402300799999
	if _, err := nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ts", Records: []*logdv1.Record{{Value: []byte("end of time"), TimestampMs: last}}})); err != nil {
		t.Fatal(err)
	}
	if out := e2e.Logctl(t, nd, "consume", "ts", "-o", "json"); !strings.Contains(out, "9999-12-31T23:59:59.999Z") || !strings.Contains(out, "end of time") {
		t.Fatalf("logctl consume -o json:\n%s", out)
	}
}

// reasonOfErr returns the ErrorInfo reason of a call's error.
func reasonOfErr(err error) logdv1.Reason {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return logdv1.Reason_REASON_UNSPECIFIED
	}
	return e2e.ReasonOf(ce)
}

// TestAbuseTopicFlood: clients create topics through every node of a
// three-node cluster, concurrently, far past the cluster's quota of
// topics and partitions. Creations past it are refused with
// RESOURCE_EXHAUSTED (reason INVALID_ARGUMENT, not retried); every node
// ends with the same topics, within the quota, and shows the counts and
// the quota in its metrics.
func TestAbuseTopicFlood(t *testing.T) {
	const maxTopics, maxPartitions = 20, 40
	c := e2e.NewCluster(t, 3, "--max-topics", strconv.Itoa(maxTopics), "--max-partitions", strconv.Itoa(maxPartitions))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	created, refused := 0, 0
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 9 {
		nd := c.Nodes[g%3]
		wg.Go(func() {
			for i := range 10 {
				parts := int32(1 + 2*(i%2)) // 1 or 3
				_, err := nd.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: fmt.Sprintf("flood-%d-%d", g, i), Partitions: parts}))
				mu.Lock()
				switch {
				case err == nil:
					created++
				case connect.CodeOf(err) == connect.CodeResourceExhausted && reasonOfErr(err) == logdv1.Reason_REASON_INVALID_ARGUMENT && strings.Contains(err.Error(), "quota"):
					refused++
				default:
					t.Errorf("create through %s: %v", nd.ID, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	c.Converge(ctx)
	var first []string
	for i, nd := range c.Nodes {
		resp, err := nd.RPC.ListTopics(ctx, connect.NewRequest(&logdv1.ListTopicsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		parts := 0
		for _, tp := range resp.Msg.Topics {
			names = append(names, tp.Name)
			parts += int(tp.Partitions)
		}
		slices.Sort(names)
		if len(names) > maxTopics || parts > maxPartitions {
			t.Errorf("%s holds %d topics with %d partitions, past the quota of %d and %d", nd.ID, len(names), parts, maxTopics, maxPartitions)
		}
		if i == 0 {
			first = names
			if len(names) != created {
				t.Errorf("%d creations acknowledged, %d topics held", created, len(names))
			}
		} else if !slices.Equal(names, first) {
			t.Errorf("%s holds other topics than %s", nd.ID, c.Nodes[0].ID)
		}
		if got, _ := metric(t, nd, "logd_topics"); int(got) != len(names) {
			t.Errorf("%s: logd_topics = %v, want %d", nd.ID, got, len(names))
		}
		if got, _ := metric(t, nd, "logd_quota_limit", `resource="topics"`); got != maxTopics {
			t.Errorf("%s: logd_quota_limit{resource=topics} = %v, want %d", nd.ID, got, maxTopics)
		}
	}
	leader := c.Leader(ctx)
	refusals, _ := metric(t, leader, "logd_quota_refusals_total")
	t.Logf("topic flood: 90 creations through 3 nodes in %v: %d created, %d refused by the quota (leader counted %v)", took.Round(time.Millisecond), created, refused, refusals)
	if refused == 0 || created == 0 {
		t.Errorf("created %d, refused %d: the flood should fill the quota and pass it", created, refused)
	}
	// The cluster still serves writes.
	if _, err := leader.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: first[0], Records: []*logdv1.Record{{Value: []byte("still serving")}}})); err != nil {
		t.Errorf("the cluster does not take writes after the flood: %v", err)
	}
}
