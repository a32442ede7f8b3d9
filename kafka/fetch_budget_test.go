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
	"github.com/logd-dev/logd/queue"
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

// TestShareFetchAnswerBudget: ShareFetches of many members at once, on as
// many connections, are charged for the most they may answer once records
// are claimable, before they are claimed: the bytes charged at once never
// pass the client's share (every connection comes from one address), the
// largest answer was charged at least its record bytes, the fetches past
// the share wait or are answered throttled having acquired nothing, every
// record is acquired exactly once in the end, and every charge is given
// back. Without the charge (shareClaim's admit) nothing is charged and
// nothing waits, and the test fails.
func TestShareFetchAnswerBudget(t *testing.T) {
	const (
		limit    = 2 << 20
		share    = limit / 2
		valueLen = 128 << 10
		values   = 16
		members  = 12
	)
	answers := membudget.New(limit, share)
	tn := startNode(t, withShare(time.Minute, time.Minute, members), func(o *Options) {
		o.Answers, o.AnswerWait = answers, 200*time.Millisecond
	})
	// Each ShareFetch asks for 1 MiB (rawClient.shareFetch), the share:
	// the answers are built one at a time.
	shareSetup(t, tn, "sq", "g", 0, queue.Config{})
	pc := dial(t, tn.addr)
	for i := range values {
		v := fmt.Sprintf("%d%s", i%10, strings.Repeat("x", valueLen-1))
		if code, _ := produceCode(t, pc.do(produceReq(9, -1, "sq", 0, records(t, v)))); code != 0 {
			t.Fatalf("produce: %s", errorName(code))
		}
	}
	conns := make([]*rawClient, members)
	for i := range conns {
		conns[i] = dial(t, tn.addr)
		conns[i].join("g", fmt.Sprint("m", i), "sq")
	}
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		served, throttled int
		largest           int64 // record bytes of the largest answer
		unwanted          []string
		acquiredBy        = map[int64]int{} // offset: times acquired
	)
	for i, c := range conns {
		wg.Go(func() {
			resp := c.shareFetch(1, tn, "g", fmt.Sprint("m", i), 0, "sq", true, 0)
			got := acquired(resp)[0]
			mu.Lock()
			defer mu.Unlock()
			for o := range got {
				acquiredBy[o]++
			}
			switch {
			case resp.ErrorCode != 0:
				unwanted = append(unwanted, fmt.Sprintf("m%d: %s", i, errorName(resp.ErrorCode)))
			case resp.ThrottleMillis > 0 && len(got) > 0:
				unwanted = append(unwanted, fmt.Sprintf("m%d: throttled, having acquired %d records", i, len(got)))
			case resp.ThrottleMillis > 0:
				throttled++
			default:
				served++
				largest = max(largest, int64(len(got))*valueLen)
			}
		})
	}
	wg.Wait()
	st := answers.Stats()
	t.Logf("%d share fetches: %d served, %d throttled; largest answer %d record bytes; peak %d bytes charged, %d waits", members, served, throttled, largest, st.Peak, st.Waited)
	if len(unwanted) > 0 || served == 0 {
		t.Fatalf("%d served; answers neither served nor throttled: %v", served, unwanted)
	}
	if st.Peak > share {
		t.Errorf("peak charge %d bytes; want at most %d, the client's share", st.Peak, share)
	}
	if largest == 0 || st.Peak < largest {
		t.Errorf("peak charge %d bytes; the largest answer held %d record bytes", st.Peak, largest)
	}
	if st.Waited == 0 {
		t.Errorf("no share fetch waited for the budget")
	}
	if int(st.Refused) != throttled {
		t.Errorf("budget refused %d, %d answers throttled", st.Refused, throttled)
	}
	// Member 0 takes what is left: a throttled fetch acquired nothing, so
	// every record is acquired once.
	for epoch := int32(1); len(acquiredBy) < values; epoch++ {
		if epoch > 100 {
			t.Fatalf("%d of %d records acquired after %d fetches", len(acquiredBy), values, epoch)
		}
		for o := range acquired(conns[0].shareFetch(1, tn, "g", "m0", epoch, "sq", false, 0))[0] {
			acquiredBy[o]++
		}
	}
	for o, n := range acquiredBy {
		if n != 1 {
			t.Errorf("offset %d acquired %d times", o, n)
		}
	}
	waitFor(t, 10*time.Second, "every charge given back", func() bool { return answers.Stats().InUse == 0 })
}
