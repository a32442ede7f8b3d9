package kafka

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/internal/membudget"
)

// TestFetchAnswerBudget: Fetches asking for all they may, many at once on
// as many connections, are held to the answer budget: the bytes charged at
// once never pass the client's share (half the budget: every connection
// comes from one address), the fetches past it wait or are answered
// empty with throttle_time_ms, and every charge is given back once the
// answers are written. With the budget switched off (membudget.New(-1, 0)) the
// peak passes the share and nothing waits, and the test fails.
func TestFetchAnswerBudget(t *testing.T) {
	const (
		limit   = 2 << 20
		share   = limit / 2
		batches = 8
		fetches = 16
	)
	answers := membudget.New(limit, share)
	tn := startNode(t, func(o *Options) { o.Answers, o.AnswerWait = answers, 200*time.Millisecond })
	tn.createTopic("big", 1, nil)
	c := dial(t, tn.addr)
	for i := range batches {
		v := fmt.Sprintf("%d%s", i, strings.Repeat("x", 128<<10))
		if code, _ := produceCode(t, c.do(produceReq(9, -1, "big", 0, records(t, v)))); code != 0 {
			t.Fatalf("produce: %s", errorName(code))
		}
	}
	conns := make([]*rawClient, fetches)
	for i := range conns {
		conns[i] = dial(t, tn.addr)
	}
	var (
		wg                          sync.WaitGroup
		mu                          sync.Mutex
		served, throttled, unwanted int
	)
	for i, fc := range conns {
		wg.Go(func() {
			req := fetchReq(12, "big", 0, int64(i%batches), 0, 1, math.MaxInt32)
			req.Topics[0].Partitions[0].PartitionMaxBytes = math.MaxInt32
			resp := fc.do(req).(*kmsg.FetchResponse)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 && len(resp.Topics[0].Partitions[0].RecordBatches) > 0:
				served++
			case len(resp.Topics) == 0 && resp.ThrottleMillis > 0:
				throttled++
			default:
				unwanted++
			}
		})
	}
	wg.Wait()
	st := answers.Stats()
	t.Logf("%d fetches: %d served, %d throttled; peak %d bytes charged, %d waits", fetches, served, throttled, st.Peak, st.Waited)
	if unwanted > 0 || served == 0 {
		t.Errorf("%d answers neither served nor throttled, %d served", unwanted, served)
	}
	if st.Peak <= 0 || st.Peak > share {
		t.Errorf("peak charge %d bytes; want in (0, %d], the client's share", st.Peak, share)
	}
	if st.Waited == 0 {
		t.Errorf("no fetch waited for the budget")
	}
	if int(st.Refused) != throttled {
		t.Errorf("budget refused %d, %d answers throttled", st.Refused, throttled)
	}
	deadline := time.Now().Add(10 * time.Second)
	for answers.Stats().InUse != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := answers.Stats().InUse; n != 0 {
		t.Errorf("%d bytes still charged after every answer was read", n)
	}
}
