package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// logdBinary is built once per test run by TestMain.
var logdBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "logd-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logdBinary = filepath.Join(dir, "logd")
	out, err := exec.Command("go", "build", "-race", "-o", logdBinary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build logd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one logd process under test.
type proc struct {
	t       *testing.T
	dataDir string
	listen  string
	raft    string
	args    []string
	cmd     *exec.Cmd
	logs    *os.File
	client  logdv1connect.LogServiceClient
}

// handedOut holds every address freeAddr returned in this test binary: a
// port is free when probed but the kernel may offer it again to the next
// probe before the first process binds it (seen as two nodes of one
// cluster given the same port).
var handedOut sync.Map

func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
	t.Fatal("no unused port after 100 tries")
	return ""
}

func newProc(t *testing.T, extra ...string) *proc {
	t.Helper()
	p := &proc{t: t, dataDir: t.TempDir(), listen: freeAddr(t), raft: freeAddr(t), args: extra}
	logs, err := os.Create(filepath.Join(t.TempDir(), "logd.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.logs = logs
	p.client = logdv1connect.NewLogServiceClient(http.DefaultClient, "http://"+p.listen)
	t.Cleanup(func() {
		p.kill()
		logs.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("logd output:\n%s", tail(string(b), 4000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// start launches logd and waits until it is ready.
func (p *proc) start() {
	p.t.Helper()
	args := append([]string{"--data-dir", p.dataDir, "--listen", p.listen, "--raft-addr", p.raft, "--node-id", "n1"}, p.args...)
	p.cmd = exec.Command(logdBinary, args...)
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + p.listen + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				// Ready means a leader exists; produce needs this node to be it.
				st, err := p.client.Status(context.Background(), connect.NewRequest(&logdv1.StatusRequest{}))
				if err == nil && st.Msg.State == "Leader" {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("logd not ready after 30s (last error %v)", err)
		}
		time.Sleep(20 * time.Millisecond) // polling a real process; there is no event to wait on
	}
}

func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	p.cmd = nil
}

func (p *proc) stop() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Fatalf("logd exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-done
		p.t.Fatal("logd did not stop within 20s of SIGTERM")
	}
	p.cmd = nil
}

// ack is one acknowledged record.
type ack struct {
	partition int32
	offset    int64
	value     string
}

// readAll reads every partition of a topic from offset 0.
func (p *proc) readAll(ctx context.Context, topic string, partitions int32) map[int32][]*logdv1.FetchedRecord {
	p.t.Helper()
	out := map[int32][]*logdv1.FetchedRecord{}
	for part := int32(0); part < partitions; part++ {
		off := int64(0)
		for i := 0; i < 100000; i++ {
			resp, err := p.client.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: topic, Partition: part, Offset: off, MaxBytes: 1 << 20}))
			if err != nil {
				p.t.Fatalf("fetch %s-%d@%d: %v", topic, part, off, err)
			}
			if len(resp.Msg.Records) == 0 {
				break
			}
			out[part] = append(out[part], resp.Msg.Records...)
			off = resp.Msg.NextOffset
		}
	}
	return out
}

// check applies FAULTS.md's rules: every acked record at its offset; no
// offset with two values; no value twice; nothing never attempted.
func check(t *testing.T, got map[int32][]*logdv1.FetchedRecord, acks []ack, attempted map[string]bool) {
	t.Helper()
	byValue := map[string]ack{}
	for part, recs := range got {
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Errorf("partition %d: record %d has offset %d (offsets must be dense from 0)", part, i, r.Offset)
			}
			v := string(r.Value)
			if prev, dup := byValue[v]; dup {
				t.Errorf("duplicate: %q at %d/%d and %d/%d", v, prev.partition, prev.offset, part, r.Offset)
			}
			byValue[v] = ack{part, r.Offset, v}
			if !attempted[v] {
				t.Errorf("unexpected: %q at %d/%d was never sent", v, part, r.Offset)
			}
		}
	}
	lost := 0
	for _, a := range acks {
		g, ok := byValue[a.value]
		if !ok {
			lost++
			if lost < 10 {
				t.Errorf("lost: %q acked at %d/%d", a.value, a.partition, a.offset)
			}
			continue
		}
		if g.partition != a.partition || g.offset != a.offset {
			t.Errorf("inconsistent: %q acked at %d/%d, read at %d/%d", a.value, a.partition, a.offset, g.partition, g.offset)
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged records lost", lost)
	}
}

// producers runs n concurrent producers of unique values until stop is
// closed, recording attempts and acknowledgements.
type producers struct {
	mu        sync.Mutex
	acks      []ack
	attempted map[string]bool
	calls     int
}

func (ps *producers) run(ctx context.Context, c logdv1connect.LogServiceClient, topic string, id int, stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		req := &logdv1.ProduceRequest{Topic: topic}
		ps.mu.Lock()
		for j := 0; j < 10; j++ {
			v := fmt.Sprintf("c%d-%d-%d", id, n, j)
			ps.attempted[v] = true
			req.Records = append(req.Records, &logdv1.Record{Key: []byte(fmt.Sprintf("k%d", j)), Value: []byte(v)})
		}
		ps.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.Produce(cctx, connect.NewRequest(req))
		cancel()
		ps.mu.Lock()
		ps.calls++
		if err == nil {
			for i, r := range resp.Msg.Results {
				ps.acks = append(ps.acks, ack{r.Partition, r.Offset, string(req.Records[i].Value)})
			}
		}
		ps.mu.Unlock()
		if err != nil {
			// Unknown or failed: never counted as lost. Back off while down.
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func (ps *producers) ackCount() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.acks)
}

// TestKillUnderLoad SIGKILLs logd while concurrent producers write, three
// times, then checks every acknowledged record. The snapshot variant takes
// Raft snapshots every few entries during the run.
func TestKillUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "no-snapshots", args: nil},
		{name: "snapshots", args: []string{"--snapshot-threshold", "16", "--snapshot-interval", "50ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			p := newProc(t, tc.args...)
			p.start()
			const parts = 3
			if _, err := p.client.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "e2e", Partitions: parts})); err != nil {
				t.Fatal(err)
			}
			ps := &producers{attempted: map[string]bool{}}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); ps.run(ctx, p.client, "e2e", i, stop) }()
			}
			for round := 0; round < 3; round++ {
				target := ps.ackCount() + 400
				waitFor(t, ctx, func() bool { return ps.ackCount() >= target })
				p.kill()
				p.start()
			}
			waitFor(t, ctx, func() bool { return ps.ackCount() >= 1600 })
			close(stop)
			wg.Wait()
			got := p.readAll(ctx, "e2e", parts)
			check(t, got, ps.acks, ps.attempted)
			t.Logf("%d calls, %d records acknowledged", ps.calls, len(ps.acks))
		})
	}
}

func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("condition not reached: %v", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestRestartTenTimes restarts logd ten times in a row, alternately with
// SIGTERM and SIGKILL; no offset or record changes.
func TestRestartTenTimes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newProc(t, "--snapshot-threshold", "8", "--snapshot-interval", "100ms")
	p.start()
	if _, err := p.client.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "r", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	var acks []ack
	attempted := map[string]bool{}
	for i := 0; i < 40; i++ {
		req := &logdv1.ProduceRequest{Topic: "r"}
		for j := 0; j < 5; j++ {
			v := fmt.Sprintf("v%d-%d", i, j)
			attempted[v] = true
			req.Records = append(req.Records, &logdv1.Record{Value: []byte(v)})
		}
		resp, err := p.client.Produce(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range resp.Msg.Results {
			acks = append(acks, ack{r.Partition, r.Offset, string(req.Records[k].Value)})
		}
	}
	want := render(p.readAll(ctx, "r", 2))
	check(t, p.readAll(ctx, "r", 2), acks, attempted)
	for i := 0; i < 10; i++ {
		if i%2 == 0 {
			p.stop()
		} else {
			p.kill()
		}
		p.start()
		if got := render(p.readAll(ctx, "r", 2)); got != want {
			t.Fatalf("restart %d changed the log:\n got %s\nwant %s", i+1, got, want)
		}
	}
	desc, err := p.client.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "r"}))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, pi := range desc.Msg.Partitions {
		total += pi.EndOffset
	}
	if total != int64(len(acks)) {
		t.Fatalf("end offsets sum to %d, want %d", total, len(acks))
	}
}

func render(m map[int32][]*logdv1.FetchedRecord) string {
	var parts []string
	for p, recs := range m {
		var b strings.Builder
		fmt.Fprintf(&b, "%d:", p)
		for _, r := range recs {
			fmt.Fprintf(&b, " %d=%s", r.Offset, r.Value)
		}
		parts = append(parts, b.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, "\n")
}

// TestBadInput sends hostile requests; each gets a typed error and the next
// request works.
func TestBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newProc(t)
	p.start()
	if _, err := p.client.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "ok", Partitions: 2, Config: map[string]string{"max.message.bytes": "1024"}})); err != nil {
		t.Fatal(err)
	}
	part := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name   string
		call   func() error
		code   connect.Code
		reason logdv1.Reason
	}{
		{"path topic name", func() error {
			_, err := p.client.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "../x", Partitions: 1}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"zero partitions", func() error {
			_, err := p.client.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "z", Partitions: 0}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"unknown config", func() error {
			_, err := p.client.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "z", Partitions: 1, Config: map[string]string{"nope": "1"}}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"topic exists", func() error {
			_, err := p.client.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "ok", Partitions: 1}))
			return err
		}, connect.CodeAlreadyExists, logdv1.Reason_REASON_TOPIC_EXISTS},
		{"unknown topic", func() error {
			_, err := p.client.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "nope", Records: []*logdv1.Record{{Value: []byte("x")}}}))
			return err
		}, connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_TOPIC},
		{"oversized record", func() error {
			_, err := p.client.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ok", Records: []*logdv1.Record{{Value: []byte("fine")}, {Value: make([]byte, 2048)}}}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_RECORD_TOO_LARGE},
		{"bad partition", func() error {
			_, err := p.client.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ok", Records: []*logdv1.Record{{Value: []byte("fine")}, {Value: []byte("x"), Partition: part(7)}}}))
			return err
		}, connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_PARTITION},
		{"no records", func() error {
			_, err := p.client.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ok"}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"negative offset", func() error {
			_, err := p.client.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "ok", Offset: -1}))
			return err
		}, connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT},
		{"offset past end", func() error {
			_, err := p.client.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "ok", Offset: 99}))
			return err
		}, connect.CodeOutOfRange, logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE},
	} {
		err := tc.call()
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code {
			t.Errorf("%s: got %v, want code %v", tc.name, err, tc.code)
			continue
		}
		if r := reasonOf(ce); r != tc.reason {
			t.Errorf("%s: reason %v, want %v", tc.name, r, tc.reason)
		}
	}
	// Nothing was written by the refused calls; the next call works.
	resp, err := p.client.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "ok", Records: []*logdv1.Record{{Value: []byte("after"), Partition: part(0)}}}))
	if err != nil {
		t.Fatal(err)
	}
	if off := resp.Msg.Results[0].Offset; off != 0 {
		t.Fatalf("first accepted record at offset %d: a refused call wrote something", off)
	}
	if _, err := p.client.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "z"})); err == nil {
		t.Fatal("refused create made a topic")
	}
}

func reasonOf(ce *connect.Error) logdv1.Reason {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*logdv1.ErrorInfo); ok {
				return info.Reason
			}
		}
	}
	return logdv1.Reason_REASON_UNSPECIFIED
}

// TestListOffsetsByTime checks the time-index lookup end to end.
func TestListOffsetsByTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newProc(t)
	p.start()
	if _, err := p.client.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "tm", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	base := int64(1_700_000_000_000)
	for i := int64(0); i < 5; i++ {
		req := &logdv1.ProduceRequest{Topic: "tm", Records: []*logdv1.Record{{Value: []byte("x"), TimestampMs: base + i*1000}}}
		if _, err := p.client.Produce(ctx, connect.NewRequest(req)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ ts, want int64 }{{0, 0}, {base, 0}, {base + 1, 1}, {base + 4000, 4}, {base + 4001, 5}} {
		ts := tc.ts
		resp, err := p.client.ListOffsets(ctx, connect.NewRequest(&logdv1.ListOffsetsRequest{Topic: "tm", Partition: 0, TimestampMs: &ts}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.Offset != tc.want || resp.Msg.EndOffset != 5 {
			t.Errorf("ts %d: offset %d end %d, want %d end 5", tc.ts, resp.Msg.Offset, resp.Msg.EndOffset, tc.want)
		}
	}
}
