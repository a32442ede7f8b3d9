package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// envShareMember carries a share member helper's arguments (shareMemberSpec,
// JSON) to TestKafkaShareMemberProcess.
const envShareMember = "LOGD_TEST_SHARE_MEMBER"

// shareMemberSpec is what a share member helper process consumes.
type shareMemberSpec struct {
	Addr, Group, Topic string
}

// heldPrefix starts the line a share member helper prints once it holds
// records: the values it polled, as JSON.
const heldPrefix = "SHARE-HELD "

// TestKafkaShareMemberProcess is the share consumer that
// TestKafkaShareMemberKilled kills and stops, run as a process of its own
// (e2e.ChildCommand); without its arguments it skips. It polls until it
// gets records, prints their values and holds them: it never polls again
// (kgo would accept them) and never acknowledges, while kgo heartbeats.
func TestKafkaShareMemberProcess(t *testing.T) {
	raw := os.Getenv(envShareMember)
	if raw == "" {
		t.Skip("a helper process of TestKafkaShareMemberKilled")
	}
	var spec shareMemberSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	// kgo closes a connection idle for ConnIdleTimeout, which would
	// release the records on its own.
	cl, err := kgo.NewClient(kgo.SeedBrokers(spec.Addr), kgo.ShareGroup(spec.Group), kgo.ConsumeTopics(spec.Topic),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConnIdleTimeout(15*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		fs := cl.PollRecords(t.Context(), 0)
		if fs.IsClientClosed() {
			t.Fatal("client closed")
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		vals := make([]string, len(recs))
		for i, r := range recs {
			if r.DeliveryCount() != 1 {
				t.Fatalf("%s delivered %d times before the helper held it", r.Value, r.DeliveryCount())
			}
			vals[i] = string(r.Value)
		}
		b, _ := json.Marshal(vals)
		fmt.Printf("%s%s\n", heldPrefix, b)
		os.Stdout.Sync()
		<-t.Context().Done() // hold until killed
		return
	}
}

// shareMember is a share member helper process the test started.
type shareMember struct {
	cmd  *exec.Cmd
	held chan []string // the values it holds, once
}

// startShareMember starts a share member helper process and returns once
// it holds records.
func startShareMember(t *testing.T, ctx context.Context, spec shareMemberSpec) *shareMember {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := e2e.ChildCommand("TestKafkaShareMemberProcess", envShareMember+"="+string(b))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &shareMember{cmd: cmd, held: make(chan []string, 1)}
	var tail []string
	var tailMu sync.Mutex
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), heldPrefix); ok {
				var vals []string
				if json.Unmarshal([]byte(rest), &vals) == nil {
					m.held <- vals
				}
				continue
			}
			tailMu.Lock()
			tail = append(tail, sc.Text())
			tailMu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			tailMu.Lock()
			t.Logf("share member helper %d output:\n%s\n%s", cmd.Process.Pid, e2e.Tail(strings.Join(tail, "\n"), 2000), e2e.Tail(stderr.String(), 2000))
			tailMu.Unlock()
		}
	})
	select {
	case vals := <-m.held:
		m.held <- vals
	case <-exited:
		t.Fatalf("share member helper %d ended before it held a record", cmd.Process.Pid)
	case <-ctx.Done():
		t.Fatalf("share member helper %d holds no record: %v", cmd.Process.Pid, ctx.Err())
	}
	return m
}

// heldValues returns the values the helper holds.
func (m *shareMember) heldValues() []string {
	vals := <-m.held
	m.held <- vals
	return vals
}

// shareDeliveries is what the surviving consumer received: per value, the
// delivery counts and when.
type shareDeliveries struct {
	mu  sync.Mutex
	got map[string][]shareDelivery
}

type shareDelivery struct {
	count int32
	at    time.Time
}

// shareGroupMembers is the number of members ShareGroupDescribe lists.
func shareGroupMembers(t *testing.T, ctx context.Context, cl *kgo.Client, group string) int {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("describe share group %s: %+v", group, resp.Groups)
	}
	return len(resp.Groups[0].Members)
}

// TestKafkaShareMemberKilled: share consumers in processes of their own
// (TestKafkaShareMemberProcess) take records of a share group and hold
// them; another consumer, in the test, accepts what it gets.
//
//   - killed: the holders are SIGKILLed. Their connections close, and the
//     records they held reach the other consumer, each delivered once more,
//     while the group still lists the killed members: their session
//     timeout (45 s) has not released them.
//   - stopped: the holders are SIGSTOPped. Their connections stay open
//     and they stop heartbeating; after the session timeout (3 s here)
//     the members are gone and their records reach the other consumer,
//     each delivered once more, while the holders are still stopped.
//
// In both, every record of the topic ends accepted, none by a lock expiry
// (a lock of 10 minutes), and the time from the signal to the last held
// record's redelivery is logged. The default run has one holder and 300
// records; LOGD_FAULT_LONG=1 (make fault) three holders and 30,000
// records of 6 partitions.
func TestKafkaShareMemberKilled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sig     syscall.Signal
		args    []string
		members int // members ShareGroupDescribe lists when the records are back
	}{
		{name: "killed", sig: syscall.SIGKILL},
		{name: "stopped", sig: syscall.SIGSTOP, args: []string{"--kafka-share-session-timeout", "3s", "--kafka-share-heartbeat-interval", "500ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e2e.ParallelShort(t)
			holders, n, partitions := 1, 300, int32(3)
			if e2e.FaultLong() {
				holders, n, partitions = 3, 30_000, 6
			}
			kaddr := e2e.FreeAddr(t)
			nd := e2e.StartNode(t, append([]string{"--kafka-listen", kaddr}, tc.args...)...)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			const topic, group = "share-kill", "holders"
			e2e.CreateTopic(t, ctx, nd, topic, partitions, nil)

			admin, err := kgo.NewClient(kgo.SeedBrokers(kaddr), kgo.DefaultProduceTopic(topic))
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			setGroupConfigs(t, ctx, admin, group, map[string]string{
				"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "600000", "share.delivery.count.limit": "5",
			})
			recs := make([]*kgo.Record, 0, n)
			for i := range n {
				recs = append(recs, kgo.StringRecord(fmt.Sprintf("r-%06d", i)))
			}
			if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}

			spec := shareMemberSpec{Addr: kaddr, Group: group, Topic: topic}
			var ms []*shareMember
			held := map[string]bool{}
			for range holders {
				m := startShareMember(t, ctx, spec)
				ms = append(ms, m)
				for _, v := range m.heldValues() {
					if held[v] {
						t.Fatalf("%s held by two members", v)
					}
					held[v] = true
				}
			}

			// The survivor accepts whatever it gets. It fetches with
			// kgo's default wait (5 s): a release wakes a waiting
			// ShareFetch, so the records need not wait for its end.
			got := &shareDeliveries{got: map[string][]shareDelivery{}}
			cl, err := kgo.NewClient(kgo.SeedBrokers(kaddr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
			if err != nil {
				t.Fatal(err)
			}
			polled := make(chan struct{})
			go func() {
				defer close(polled)
				for {
					fs := cl.PollRecords(ctx, 0)
					if fs.IsClientClosed() || ctx.Err() != nil {
						return
					}
					now := time.Now()
					got.mu.Lock()
					for _, r := range fs.Records() {
						got.got[string(r.Value)] = append(got.got[string(r.Value)], shareDelivery{r.DeliveryCount(), now})
						r.Ack(kgo.AckAccept)
					}
					got.mu.Unlock()
				}
			}()
			defer func() { cl.Close(); <-polled }()
			e2e.WaitFor(t, ctx, "the survivor in the group", func() bool {
				return shareGroupMembers(t, ctx, admin, group) == holders+1
			})

			signalled := time.Now()
			for _, m := range ms {
				m.cmd.Process.Signal(tc.sig)
				if tc.sig == syscall.SIGSTOP {
					e2e.WaitStopped(m.cmd.Process.Pid)
				}
			}
			var last time.Time
			e2e.WaitFor(t, ctx, "every held record delivered again", func() bool {
				got.mu.Lock()
				defer got.mu.Unlock()
				for v := range held {
					ds := got.got[v]
					if len(ds) == 0 {
						return false
					}
					last = maxTime(last, ds[0].at)
				}
				return true
			})
			redelivered := last.Sub(signalled)
			// Why they came back: a killed member is still a member (its
			// connection closed, its session has not timed out); a
			// stopped one is gone (its session timed out) though its
			// process, and so its connection, is still there.
			want := holders + 1
			if tc.sig == syscall.SIGSTOP {
				want = 1
				for _, m := range ms {
					if st := procState(m.cmd.Process.Pid); st != 'T' && st != 't' {
						t.Fatalf("holder %d is in state %q, not stopped", m.cmd.Process.Pid, st)
					}
				}
			}
			if members := shareGroupMembers(t, ctx, admin, group); members != want {
				t.Fatalf("the group lists %d members once the held records are back, want %d", members, want)
			}

			e2e.WaitFor(t, ctx, "every record accepted", func() bool {
				q, err := nd.RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: topic, Group: group}))
				if err != nil {
					return false
				}
				var acked int64
				for _, p := range q.Msg.Partitions {
					acked += p.Acked
				}
				return acked == int64(n)
			})
			q, err := nd.RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: topic, Group: group}))
			if err != nil {
				t.Fatal(err)
			}
			var nacked, expired, dead int64
			for _, p := range q.Msg.Partitions {
				nacked, expired, dead = nacked+p.Nacked, expired+p.Expired, dead+p.DeadLettered
			}
			if expired != 0 || dead != 0 || nacked < int64(len(held)) {
				t.Fatalf("%d leases expired, %d dead-lettered, %d released; want 0, 0 and at least the %d held", expired, dead, nacked, len(held))
			}
			// Each record reached the survivor once: those the holders
			// polled at their second delivery, the others at their first
			// or, when a holder's client had fetched them ahead of its
			// poll, their second.
			got.mu.Lock()
			defer got.mu.Unlock()
			buffered := 0
			for i := range n {
				v := fmt.Sprintf("r-%06d", i)
				ds := got.got[v]
				switch {
				case len(ds) != 1:
					t.Fatalf("%s delivered to the survivor %d times (%v), want once", v, len(ds), ds)
				case held[v] && ds[0].count != 2:
					t.Fatalf("%s held by a %s member: delivery %d, want 2", v, tc.name, ds[0].count)
				case !held[v] && ds[0].count == 2:
					buffered++
				case !held[v] && ds[0].count != 1:
					t.Fatalf("%s never polled by a holder: delivery %d, want 1 or 2", v, ds[0].count)
				}
			}
			t.Logf("%d holders %s with %d of %d records polled (%d more fetched ahead): all delivered again %s after the signal (%d released, 0 expired)",
				holders, tc.name, len(held), n, buffered, redelivered.Round(time.Millisecond), nacked)
		})
	}
}

// setGroupConfigs sets GROUP-resource settings through
// IncrementalAlterConfigs.
func setGroupConfigs(t *testing.T, ctx context.Context, cl *kgo.Client, group string, kv map[string]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range kv {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("alter group configs: code %d %v", code, resp.Resources[0].ErrorMessage)
	}
}

// procState is the state letter of process pid in /proc (0 when it is
// gone).
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
