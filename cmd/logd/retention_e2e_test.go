package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestRetentionEndToEnd runs the leader's cleaner in a real process: a
// topic with small segments keeps everything under its first retention.ms;
// `topic alter` shortens it, the cleaner deletes the closed segments, a
// fetch below the new log start is out of range with the bounds, and
// describe and /metrics show the run. The run survives a SIGKILL restart
// through the snapshot.
func TestRetentionEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := e2e.StartNode(t, "--cleaner-interval", "100ms", "--snapshot-threshold", "4", "--snapshot-interval", "100ms")
	c, err := client.New(p.Listen, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "ret", 1, map[string]string{"segment.bytes": "1024", "retention.ms": "3600000"}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	part := int32(0)
	for i := range n {
		v := fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 200))
		if _, err := c.Produce(ctx, "ret", []client.Record{{Value: []byte(v), Partition: &part}}); err != nil {
			t.Fatal(err)
		}
	}
	describe := func() client.PartitionInfo {
		t.Helper()
		d, err := c.DescribeTopic(ctx, "ret")
		if err != nil {
			t.Fatal(err)
		}
		return d.Partitions[0]
	}
	// Several cleaner passes have run: nothing is an hour old.
	before := describe()
	if before.LogStart != 0 || before.End != n || before.Segments < 5 || before.LastCleanerRun != nil {
		t.Fatalf("before the alter: %+v", before)
	}

	if _, err := c.AlterTopic(ctx, "ret", map[string]string{"retention.ms": "bogus"}, nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("bad alter: %v", err)
	}
	tp, err := c.AlterTopic(ctx, "ret", map[string]string{"retention.ms": "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tp.Config["retention.ms"] != "1" || tp.Config["segment.bytes"] != "1024" {
		t.Fatalf("config after the alter: %v", tp.Config)
	}
	var after client.PartitionInfo
	e2e.WaitFor(t, ctx, "a cleaner run deleting segments", func() bool {
		// The run is recorded just after the segments go.
		after = describe()
		return after.LogStart > 0 && after.LastCleanerRun != nil
	})
	// Every closed segment went; the active one stays.
	if after.Segments != 1 || after.End != n || after.Bytes >= before.Bytes {
		t.Fatalf("after the cleaner: %+v (before %+v)", after, before)
	}
	run := after.LastCleanerRun
	if run == nil || run.Action != "trim" || run.BytesDeleted != before.Bytes-after.Bytes || time.Since(run.Time) > time.Minute {
		t.Fatalf("last cleaner run %+v (bytes %d -> %d)", run, before.Bytes, after.Bytes)
	}

	_, err = c.Fetch(ctx, client.FetchRequest{Topic: "ret", Offset: after.LogStart - 1})
	var oor *client.OutOfRangeError
	if !errors.As(err, &oor) || !errors.Is(err, client.ErrOffsetOutOfRange) || oor.LogStart != after.LogStart || oor.End != n {
		t.Fatalf("fetch below the log start: %v (%+v)", err, oor)
	}
	resp, err := c.Fetch(ctx, client.FetchRequest{Topic: "ret", Offset: after.LogStart})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Records) != int(n-after.LogStart) || !strings.HasPrefix(string(resp.Records[0].Value), fmt.Sprintf("%03d-", after.LogStart)) {
		t.Fatalf("fetch at the log start: %d records", len(resp.Records))
	}

	metrics := scrape(t, "http://"+p.Listen+"/metrics")
	for name, want := range map[string]float64{"logd_cleaner_trims_total": 1, "logd_cleaner_bytes_deleted_total": float64(run.BytesDeleted)} {
		if got := metrics[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if metrics["logd_cleaner_passes_total"] < 2 {
		t.Errorf("logd_cleaner_passes_total = %v", metrics["logd_cleaner_passes_total"])
	}

	// The run is in the snapshot of the group that holds the partition
	// (the meta group, or its data group): wait for one past it, then
	// SIGKILL.
	st, err := p.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snapDir, applied := p.DataDir, st.AppliedIndex
	if g := describe().DataGroup; g != 0 {
		snapDir = filepath.Join(p.DataDir, "groups", fmt.Sprintf("g%d", g))
		for _, dg := range st.DataGroups {
			if dg.Id == g {
				applied = dg.AppliedIndex
			}
		}
	}
	for i := range 5 {
		if _, err := c.Produce(ctx, "ret", []client.Record{{Value: []byte(fmt.Sprint("more-", i)), Partition: &part}}); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitFor(t, ctx, "a snapshot of the cleaner run", func() bool { return latestSnapshotIndex(t, snapDir) >= applied })
	p.Kill()
	p.Start()
	if got := describe(); got.LastCleanerRun == nil || *got.LastCleanerRun != *run || got.LogStart != after.LogStart {
		t.Fatalf("after a restart: %+v, run %+v; want run %+v", got, got.LastCleanerRun, run)
	}
}

// scrape reads the unlabelled samples of a Prometheus text page.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z_]+) (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			out[m[1]] = v
		}
	}
	return out
}

// latestSnapshotIndex is the Raft index of the newest snapshot in a data
// dir, or a data group's directory in it (hashicorp/raft names them
// term-index-time), 0 if none.
func latestSnapshotIndex(t *testing.T, dataDir string) uint64 {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, "raft", "snapshots"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var best uint64
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-")
		if len(parts) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if idx, err := strconv.ParseUint(parts[1], 10, 64); err == nil {
			best = max(best, idx)
		}
	}
	return best
}
