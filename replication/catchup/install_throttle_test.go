package catchup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// pacedLeader returns a leader state machine of one partition of about
// 42 KB in segments of 16 KiB, registered as node "a" at "a:1", and its
// snapshot and the bytes of the segments the snapshot lists.
func pacedLeader(t *testing.T) (*fsm.FSM, []byte, int64) {
	t.Helper()
	cmds := [][]byte{
		fsmtest.Command(t, fsm.CmdCreateTopic, 1, fsm.CreateTopic{Name: "t", Partitions: 1, Config: map[string]string{"segment.bytes": "16384"}}),
		fsmtest.Command(t, fsm.CmdNodeRegister, 2, fsm.NodeRegister{ID: "a", APIAddress: "a:1"}),
	}
	for i := range 40 {
		v := fmt.Sprintf("%04d%s", i, strings.Repeat("x", 996))
		cmds = append(cmds, fsm.EncodeAppend(int64(10+i), fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, v)}}}))
	}
	leader, _ := fsmtest.New(t, t.TempDir(), nil)
	leader.ApplyBatch(fsmtest.Entries(cmds...))
	p, err := leader.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range p.Log().Segments() {
		n += s.Bytes
	}
	return leader, fsmtest.Snapshot(t, leader), n
}

// TestFetchPacedByThrottle: a follower installing a snapshot through a
// fetcher with a throttle reads every listed segment byte through it, so
// the install takes at least (bytes - burst) / rate, and ends with the
// leader's records. The waits do not count against the fetcher's timeout,
// which is shorter than them.
func TestFetchPacedByThrottle(t *testing.T) {
	leader, snap, n := pacedLeader(t)
	const rate = 16 << 10 // burst 16 KiB
	if n < 2*rate {
		t.Fatalf("the leader holds %d bytes; the test wants more than two seconds of the rate", n)
	}
	minTime := time.Duration(float64(n-rate) / rate * float64(time.Second))
	th := NewThrottle(rate)
	src := &fileSource{peers: map[string]*fsm.FSM{"a:1": leader}}
	f, fatals := fsmtest.New(t, t.TempDir(), NewSegmentFetcher(src, FetcherOptions{Timeout: minTime / 2, Logger: fsmtest.Logger(), Throttle: th}))
	start := time.Now()
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < minTime {
		t.Errorf("%d bytes at %d B/s installed in %v, want at least %v", n, rate, elapsed, minTime)
	}
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}
	if got, want := fsmtest.ReadAll(t, f, "t", 0), fsmtest.ReadAll(t, leader, "t", 0); strings.Join(got, ",") != strings.Join(want, ",") || len(got) != 40 {
		t.Fatalf("the follower reads %d records, the leader %d", len(got), len(want))
	}
	if st := th.Stats(); st.Bytes != n || st.ThrottleWait <= 0 {
		t.Errorf("stats %+v; want %d bytes and some wait", st, n)
	}
}

// TestFetchStopEndsWait: closing the fetcher's Stop (the node closing)
// ends an install whose read waits for the budget (here, behind an hour
// of it), with an error that says so, and the follower's log stays as it
// was.
func TestFetchStopEndsWait(t *testing.T) {
	leader, snap, _ := pacedLeader(t)
	const rate = 16 << 10
	th := NewThrottle(rate)
	now := time.Now()
	for range 3600 {
		th.lim.ReserveN(now, rate)
	}
	read := make(chan struct{})
	src := &signalSource{SegmentSource: &fileSource{peers: map[string]*fsm.FSM{"a:1": leader}}, read: read}
	stop := make(chan struct{})
	dir := t.TempDir()
	f, _ := fsmtest.New(t, dir, NewSegmentFetcher(src, FetcherOptions{Logger: fsmtest.Logger(), Throttle: th, Stop: stop}))
	done := make(chan error, 1)
	go func() { done <- f.Restore(io.NopCloser(bytes.NewReader(snap))) }()
	<-read
	close(stop)
	select {
	case err := <-done:
		if !errors.Is(err, errStopped) {
			t.Fatalf("restore: %v, want %v", err, errStopped)
		}
	case <-time.After(time.Minute):
		t.Fatal("an install waiting for the budget outlived the node's stop by a minute (the budget holds it for an hour)")
	}
	// Nothing was installed: only the partition's empty log, no segment
	// of the leader's.
	for name := range segmentSums(t, dir) {
		if strings.HasSuffix(name, ".log") {
			if fi, err := os.Stat(dir + "/" + name); err != nil || fi.Size() != 0 {
				t.Errorf("%s: %v, %v; want an empty log", name, fi, err)
			}
		}
	}
}

// signalSource closes read once a data stream it returned was first read.
type signalSource struct {
	SegmentSource
	read chan struct{}
	once sync.Once
}

func (s *signalSource) SegmentData(ctx context.Context, addr string, ref SegmentRef) (io.ReadCloser, error) {
	rc, err := s.SegmentSource.SegmentData(ctx, addr, ref)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&signalReader{r: rc, read: s.read, once: &s.once}, rc}, nil
}
