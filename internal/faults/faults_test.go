package faults

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr bool
	}{
		{name: "nothing", env: nil, want: Config{}},
		{name: "power cut", env: map[string]string{EnvPowerCut: "1"}, want: Config{PowerCut: PowerCutOn}},
		{name: "power cut without fsync", env: map[string]string{EnvPowerCut: "nosync"}, want: Config{PowerCut: PowerCutNoSync}},
		{name: "bad power cut", env: map[string]string{EnvPowerCut: "yes"}, wantErr: true},
		{name: "slow fsync", env: map[string]string{EnvSlowFsync: "20ms"}, want: Config{SlowSync: Delay{Base: 20 * time.Millisecond}}},
		{name: "slow fsync with jitter", env: map[string]string{EnvSlowFsync: "20ms,5ms"}, want: Config{SlowSync: Delay{Base: 20 * time.Millisecond, Jitter: 5 * time.Millisecond}}},
		{name: "negative fsync delay", env: map[string]string{EnvSlowFsync: "-1ms"}, wantErr: true},
		{name: "bad jitter", env: map[string]string{EnvSlowFsync: "1ms,x"}, wantErr: true},
		{name: "clock behind", env: map[string]string{EnvClockOffset: "-90s"}, want: Config{ClockOffset: -90 * time.Second}},
		{name: "bad clock", env: map[string]string{EnvClockOffset: "soon"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOffsetClock(t *testing.T) {
	if d := time.Until(OffsetClock(time.Hour)()); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("an hour ahead reads %v ahead", d)
	}
}

// openFile opens name through fsys for appending, creating it, and writes
// data.
func appendTo(t *testing.T, fsys log.FS, name, data string) log.File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPowerCutFS: a process that writes through a PowerCutFS and dies
// finds, at the next open, exactly the synced bytes of files whose
// creation was synced.
func TestPowerCutFS(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(t.TempDir(), "faults", "powercut.journal")
	path := func(name string) string { return filepath.Join(dir, name) }
	must(t, os.WriteFile(path("old.log"), []byte("before"), 0o644))

	p, rep, err := OpenPowerCut(log.OSFS{}, journal)
	must(t, err)
	if rep != (CutReport{}) {
		t.Errorf("first open cut %+v", rep)
	}
	a := appendTo(t, p, path("a.log"), "synced")
	must(t, p.SyncDir(dir))
	must(t, a.Sync())
	appendTo(t, p, path("a.log"), "+lost") // a second handle on a tracked file
	must(t, p.MkdirAll(path("sub"), 0o755))
	b := appendTo(t, p, path("sub/b.log"), "entry never synced") // dir is synced below, sub never
	must(t, b.Sync())
	appendTo(t, p, path("old.log"), "+lost")
	tmp := appendTo(t, p, path("m.tmp"), "meta")
	must(t, tmp.Sync())
	must(t, p.Rename(path("m.tmp"), path("m.meta")))
	r := appendTo(t, p, path("r.log"), "removed")
	must(t, p.SyncDir(dir))
	must(t, p.Remove(path("r.log")))
	c := appendTo(t, p, path("c.log"), "cut below")
	must(t, p.SyncDir(dir))
	must(t, c.Sync())
	must(t, c.Truncate(3))
	_, err = c.Write([]byte("+lost"))
	must(t, err)
	for _, f := range []log.File{a, b, tmp, r, c} {
		f.Close()
	}
	// The process dies here: no Close.

	p2, rep, err := OpenPowerCut(log.OSFS{}, journal)
	must(t, err)
	defer p2.Close()
	want := map[string]string{"a.log": "synced", "old.log": "before", "m.meta": "meta", "c.log": "cut"}
	for name, data := range want {
		got, err := os.ReadFile(path(name))
		if err != nil || string(got) != data {
			t.Errorf("%s holds %q (%v), want %q", name, got, err, data)
		}
	}
	for _, name := range []string{"sub/b.log", "r.log", "m.tmp"} {
		if _, err := os.Stat(path(name)); !os.IsNotExist(err) {
			t.Errorf("%s survived the power cut: %v", name, err)
		}
	}
	if want := (CutReport{Files: 1, Truncated: 3, Bytes: 15}); rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
}

func testBatch(t *testing.T, v string) []byte {
	t.Helper()
	b, err := batch.Build([]batch.Record{{Value: []byte(v)}})
	must(t, err)
	return b
}

// TestPowerCutLog runs a partition log with the replication layer's policy
// (no sync on append) on a PowerCutFS: after the process dies, the log
// reopens at its last sync or roll, whatever it appended after.
func TestPowerCutLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p0")
	journal := filepath.Join(t.TempDir(), "powercut.journal")
	p, _, err := OpenPowerCut(log.OSFS{}, journal)
	must(t, err)
	l, err := log.Open(dir, log.Options{FS: p, Sync: log.SyncNone})
	must(t, err)
	appendN := func(n int) {
		for range n {
			_, err := l.Append(testBatch(t, "v"), log.AppendMeta{AppliedIndex: l.AppliedIndex() + 1})
			must(t, err)
		}
	}
	appendN(10)
	must(t, l.Sync())
	appendN(5)
	must(t, l.Roll(log.AppendMeta{})) // syncs, and creates a segment whose entry is synced
	appendN(7)
	if l.EndOffset() != 22 {
		t.Fatalf("end %d before the cut", l.EndOffset())
	}
	// Dies without Close.

	p2, rep, err := OpenPowerCut(log.OSFS{}, journal)
	must(t, err)
	defer p2.Close()
	l2, err := log.Open(dir, log.Options{FS: p2, Sync: log.SyncNone})
	must(t, err)
	defer l2.Close()
	if l2.EndOffset() != 15 || l2.AppliedIndex() != 15 {
		t.Errorf("after the cut (%+v): end %d, applied %d; want 15, 15 (the roll)", rep, l2.EndOffset(), l2.AppliedIndex())
	}
	if rep.Bytes == 0 {
		t.Errorf("the cut dropped nothing: %+v", rep)
	}
}

func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Data: []byte{byte(i)}})
	}
	return out
}

// TestLogStoreWriteBack: entries are served from memory until written
// back; a new wrapper over the same store (a restarted process) sees only
// what was written back.
func TestLogStoreWriteBack(t *testing.T) {
	inner := raft.NewInmemStore()
	now := time.Unix(0, 0)
	s := NewLogStore(inner, Delay{}, time.Second, func() time.Time { return now })
	must(t, s.StoreLogs(entries(1, 5)))
	now = now.Add(500 * time.Millisecond)
	must(t, s.StoreLogs(entries(6, 8)))
	if last, _ := inner.LastIndex(); last != 0 {
		t.Fatalf("written back before the interval: inner last %d", last)
	}
	if first, _ := s.FirstIndex(); first != 1 {
		t.Errorf("first %d, want 1", first)
	}
	if last, _ := s.LastIndex(); last != 8 {
		t.Errorf("last %d, want 8", last)
	}
	var l raft.Log
	must(t, s.GetLog(7, &l))
	if l.Index != 7 || l.Data[0] != 7 {
		t.Errorf("GetLog(7) = %+v", l)
	}
	now = now.Add(600 * time.Millisecond) // the oldest pending is 1.1s old
	must(t, s.StoreLog(entries(9, 9)[0]))
	if last, _ := inner.LastIndex(); last != 8 {
		t.Errorf("after the interval: inner last %d, want 8", last)
	}
	must(t, s.DeleteRange(1, 3)) // compaction after a snapshot
	if first, _ := s.FirstIndex(); first != 4 {
		t.Errorf("first %d after deleting 1-3, want 4", first)
	}
	// The process dies: 9 was never written back.
	s2 := NewLogStore(inner, Delay{}, time.Second, nil)
	if last, _ := s2.LastIndex(); last != 8 {
		t.Errorf("after the cut: last %d, want 8", last)
	}
	must(t, s.Close())
	if last, _ := inner.LastIndex(); last != 9 {
		t.Errorf("Close wrote back up to %d, want 9", last)
	}
}

func TestLogStoreDelay(t *testing.T) {
	s := NewLogStore(raft.NewInmemStore(), Delay{Base: 20 * time.Millisecond}, 0, nil)
	start := time.Now()
	must(t, s.StoreLogs(entries(1, 3)))
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("StoreLogs took %v with a 20ms delay", d)
	}
	var l raft.Log
	must(t, s.GetLog(2, &l))
}
