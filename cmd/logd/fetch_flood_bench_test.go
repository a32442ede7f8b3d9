package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/internal/e2e"
)

// BenchmarkFetchFlood is the attack that once took a node to 6.6 GB, for
// its figures (docs/architecture.md, "Memory budgets"; docs/operations.md,
// "Capacity"): a topic of 60 records of 900 KiB, then for
// LOGD_FLOOD_SECONDS (default 10) 40 Connect Fetches with max_bytes
// 2^31-1 in a loop, each on its own connection, 20 more as streams of one
// HTTP/2 connection, and 40 Kafka Fetches, while one victim fetches a
// small record and times each call. It reports the node's idle and peak
// resident memory (VmRSS, sampled every 50 ms), the victim's p99 and the
// answers refused. The node is a plain build (no -race), with GOGC and
// the memory limit at their defaults (GOGC=100; no limit outside a
// cgroup); LOGD_FLOOD_FLAGS adds flags ("--memory-limit 367001600").
// LOGD_FLOOD_OFF=1 adds a run with the answer budget off, for comparison:
// it takes several GB.
//
//	go test -run '^$' -bench BenchmarkFetchFlood -benchtime 1x ./cmd/logd
func BenchmarkFetchFlood(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "logd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/logd-dev/logd/cmd/logd").CombinedOutput(); err != nil {
		b.Fatalf("build logd: %v\n%s", err, out)
	}
	runs := []struct {
		name  string
		flags []string
	}{{name: "budget"}}
	if os.Getenv("LOGD_FLOOD_OFF") == "1" {
		runs = append(runs, struct {
			name  string
			flags []string
		}{name: "off", flags: []string{"--max-inflight-response-bytes", "0"}})
	}
	for _, r := range runs {
		b.Run(r.name, func(b *testing.B) {
			for range b.N {
				fetchFlood(b, bin, r.flags)
			}
		})
	}
}

func fetchFlood(b *testing.B, bin string, flags []string) {
	const (
		records     = 60
		recordBytes = 900 << 10
		connect1    = 40
		streams     = 20
		kafkaConns  = 40
	)
	dur := 10 * time.Second
	if s := os.Getenv("LOGD_FLOOD_SECONDS"); s != "" {
		if n, err := time.ParseDuration(s + "s"); err == nil && n > 0 {
			dur = n
		}
	}
	flags = append(flags, strings.Fields(os.Getenv("LOGD_FLOOD_FLAGS"))...)
	kaddr := e2e.FreeAddr(b)
	nd := e2e.NewNode(b, "n1", append(append(e2e.SingleNodeRaft(), "--kafka-listen", kaddr), flags...)...)
	nd.Cmd = exec.Command(bin, nd.Cmdline("")...)
	nd.Cmd.Stdout, nd.Cmd.Stderr = nd.Logs, nd.Logs
	if err := nd.Cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lead, cancelLead := context.WithTimeout(ctx, 30*time.Second)
	defer cancelLead()
	e2e.WaitFor(b, lead, "n1 leads", func() bool {
		st, err := nd.Status(ctx)
		return err == nil && st.Ready && st.State == "Leader"
	})
	if _, err := nd.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "flood", Partitions: 1})); err != nil {
		b.Fatal(err)
	}
	if _, err := nd.RPC.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "small", Partitions: 1})); err != nil {
		b.Fatal(err)
	}
	for i := range records {
		v := make([]byte, recordBytes)
		v[0] = byte(i)
		if _, err := nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "flood", Records: []*logdv1.Record{{Value: v}}})); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "small", Records: []*logdv1.Record{{Value: []byte("v")}}})); err != nil {
		b.Fatal(err)
	}
	pid := nd.Cmd.Process.Pid
	time.Sleep(2 * time.Second) // let the node collect what the setup left
	idle, _, _ := procStats(pid)

	b.ResetTimer()
	attack, stop := context.WithTimeout(ctx, dur)
	defer stop()
	var (
		wg                          sync.WaitGroup
		served, refused, failed     atomic.Int64
		kafkaServed, kafkaThrottled atomic.Int64
		peak                        atomic.Int64
		victimMu                    sync.Mutex
		victim                      []time.Duration
		victimErrs                  atomic.Int64
	)
	fetch := func(rpc logdv1connect.LogServiceClient, i int) {
		for off := int64(i % records); attack.Err() == nil; off = (off + 7) % records {
			_, err := rpc.Fetch(attack, connect.NewRequest(&logdv1.FetchRequest{Topic: "flood", Offset: off, MaxBytes: math.MaxInt32}))
			switch {
			case err == nil:
				served.Add(1)
			case connect.CodeOf(err) == connect.CodeResourceExhausted:
				refused.Add(1)
				time.Sleep(100 * time.Millisecond)
			case attack.Err() == nil:
				failed.Add(1)
			}
		}
	}
	for i := range connect1 {
		rpc := logdv1connect.NewLogServiceClient(&http.Client{Transport: &http.Transport{}}, "http://"+nd.Listen)
		wg.Go(func() { fetch(rpc, i) })
	}
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	one := logdv1connect.NewLogServiceClient(&http.Client{Transport: h2}, "http://"+nd.Listen)
	for i := range streams {
		wg.Go(func() { fetch(one, i) })
	}
	for i := range kafkaConns {
		wg.Go(func() {
			throttled, err := kafkaFlood(attack, kaddr, i, records)
			kafkaThrottled.Add(throttled.throttled)
			kafkaServed.Add(throttled.served)
			if err != nil && attack.Err() == nil {
				failed.Add(1)
			}
		})
	}
	wg.Go(func() {
		vc := logdv1connect.NewLogServiceClient(&http.Client{Transport: &http.Transport{}}, "http://"+nd.Listen)
		for attack.Err() == nil {
			start := time.Now()
			_, err := vc.Fetch(attack, connect.NewRequest(&logdv1.FetchRequest{Topic: "small", MaxBytes: 1024}))
			if err != nil {
				if attack.Err() == nil {
					victimErrs.Add(1)
				}
				continue
			}
			victimMu.Lock()
			victim = append(victim, time.Since(start))
			victimMu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _, _ := procStats(pid); rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-attack.Done():
				return
			case <-t.C:
			}
		}
	})
	wg.Wait()
	b.StopTimer()
	h2.CloseIdleConnections()

	slices.Sort(victim)
	var p99 time.Duration
	if len(victim) > 0 {
		p99 = victim[min(len(victim)-1, len(victim)*99/100)]
	}
	b.ReportMetric(float64(idle)/1024, "idle_rss_MiB")
	b.ReportMetric(float64(peak.Load())/1024, "peak_rss_MiB")
	b.ReportMetric(float64(p99.Microseconds())/1000, "victim_p99_ms")
	b.ReportMetric(float64(served.Load()), "api_served")
	b.ReportMetric(float64(refused.Load()), "api_refused")
	b.ReportMetric(float64(kafkaServed.Load()), "kafka_served")
	b.ReportMetric(float64(kafkaThrottled.Load()), "kafka_throttled")
	b.Logf("idle %d MiB, peak %d MiB; victim: %d calls, p99 %v, %d failed; API %d served, %d refused; Kafka %d served, %d throttled; %d other failures",
		idle/1024, peak.Load()/1024, len(victim), p99, victimErrs.Load(), served.Load(), refused.Load(), kafkaServed.Load(), kafkaThrottled.Load(), failed.Load())
	if _, _, alive := procStats(pid); !alive {
		b.Fatal("the node died under the flood")
	}
}

// kafkaCounts is what one Kafka connection of the flood got.
type kafkaCounts struct{ served, throttled int64 }

// kafkaFlood sends Fetches of everything the topic holds on one Kafka
// connection until ctx ends.
func kafkaFlood(ctx context.Context, addr string, i, records int) (kafkaCounts, error) {
	var out kafkaCounts
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return out, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("flood"))
	br := bufio.NewReaderSize(c, 1<<20)
	for corr := int32(1); ctx.Err() == nil; corr++ {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(11)
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, math.MaxInt32
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "flood"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = int64((i+int(corr))%records), math.MaxInt32
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if _, err := c.Write(f.AppendRequest(nil, req, corr)); err != nil {
			return out, err
		}
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return out, err
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(br, body); err != nil {
			return out, err
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		if err := resp.ReadFrom(body[4:]); err != nil {
			return out, fmt.Errorf("fetch response: %w", err)
		}
		if len(resp.Topics) == 0 && resp.ThrottleMillis > 0 {
			out.throttled++
			time.Sleep(time.Duration(resp.ThrottleMillis) * time.Millisecond)
			continue
		}
		out.served++
	}
	return out, nil
}
