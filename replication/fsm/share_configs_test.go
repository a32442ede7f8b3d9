package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
)

// shareCmd encodes a change of a share group's settings.
func shareCmd(t *testing.T, now int64, c AlterShareGroupConfig) []byte {
	t.Helper()
	return mustJSON(t, CmdShareGroupConfig, now, c)
}

// TestShareGroupConfigApply is a script of changes of share groups'
// settings: each step's result (the settings after it, or the refusal)
// and the group's settings after it. A refused change leaves every
// setting as it was, however much of it was valid; a group left with no
// setting is forgotten.
func TestShareGroupConfigApply(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	earliest := backend.ShareGroupConfig{AutoOffsetReset: "earliest", RecordLockDuration: 1500 * time.Millisecond, DeliveryCountLimit: 3}
	for _, step := range []struct {
		name    string
		change  AlterShareGroupConfig
		refused bool
		want    backend.ShareGroupConfig // g's settings after the step
	}{
		{name: "set all three", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{
			backend.ShareAutoOffsetReset: "earliest", backend.ShareRecordLockDurationMs: "1500", backend.ShareDeliveryCountLimit: "3"}}, want: earliest},
		{name: "unknown setting beside a valid one", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{
			backend.ShareDeliveryCountLimit: "4", "share.isolation.level": "read_committed"}}, refused: true, want: earliest},
		{name: "reset by duration", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareAutoOffsetReset: "by_duration:PT1H"}}, refused: true, want: earliest},
		{name: "lock of zero", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareRecordLockDurationMs: "0"}}, refused: true, want: earliest},
		{name: "lock past the longest lease", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareRecordLockDurationMs: "43200001"}}, refused: true, want: earliest},
		{name: "limit not a number", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareDeliveryCountLimit: "five"}}, refused: true, want: earliest},
		{name: "limit past the bound", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareDeliveryCountLimit: "1001"}}, refused: true, want: earliest},
		{name: "set and deleted", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareDeliveryCountLimit: "2"},
			Delete: []string{backend.ShareDeliveryCountLimit}}, refused: true, want: earliest},
		{name: "deleted twice", change: AlterShareGroupConfig{Group: "g", Delete: []string{backend.ShareDeliveryCountLimit, backend.ShareDeliveryCountLimit}}, refused: true, want: earliest},
		{name: "unknown deleted", change: AlterShareGroupConfig{Group: "g", Delete: []string{backend.ShareDeliveryCountLimit, "share.nope"}}, refused: true, want: earliest},
		{name: "no group", change: AlterShareGroupConfig{Group: "", Set: map[string]string{backend.ShareAutoOffsetReset: "earliest"}}, refused: true, want: earliest},
		{name: "group with a control character", change: AlterShareGroupConfig{Group: "g\n", Set: map[string]string{backend.ShareAutoOffsetReset: "earliest"}}, refused: true, want: earliest},
		{name: "nothing to change", change: AlterShareGroupConfig{Group: "g"}, want: earliest},
		{name: "delete the lock", change: AlterShareGroupConfig{Group: "g", Delete: []string{backend.ShareRecordLockDurationMs}},
			want: backend.ShareGroupConfig{AutoOffsetReset: "earliest", DeliveryCountLimit: 3}},
		{name: "latest is set, not a default", change: AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareAutoOffsetReset: "latest"}},
			want: backend.ShareGroupConfig{AutoOffsetReset: "latest", DeliveryCountLimit: 3}},
		{name: "delete the rest", change: AlterShareGroupConfig{Group: "g", Delete: []string{backend.ShareAutoOffsetReset, backend.ShareDeliveryCountLimit}}},
	} {
		res := a.apply(shareCmd(t, int64(a.index+1), step.change))
		var ce *backend.ShareConfigError
		switch {
		case step.refused && (!errors.As(res.(error), &ce) || !errors.Is(res.(error), backend.ErrInvalidConfig)):
			t.Fatalf("%s: %v, want a *backend.ShareConfigError", step.name, res)
		case step.refused && ValidateShareGroupConfig(step.change) == nil:
			t.Fatalf("%s: refused by apply, passed by ValidateShareGroupConfig", step.name)
		case !step.refused && res != step.want:
			t.Fatalf("%s: result %v, want %+v", step.name, res, step.want)
		}
		if got := f.ShareGroupConfig("g"); got != step.want {
			t.Fatalf("%s: settings %+v, want %+v", step.name, got, step.want)
		}
	}
	if got := f.ShareGroupConfigs(); len(got) != 0 {
		t.Fatalf("groups with settings once every setting is deleted: %v", got)
	}
	if f.AppliedLevel() != ShareConfigLevel || len(*fatals) != 0 {
		t.Fatalf("applied level %d, fatals %v", f.AppliedLevel(), *fatals)
	}
	if level, name, err := EntryLevel(shareCmd(t, 1, AlterShareGroupConfig{Group: "g"})); err != nil || level != ShareConfigLevel || name != "share-group-config" {
		t.Fatalf("entry level %d %q, %v", level, name, err)
	}
}

// TestShareGroupConfigUndecodable: a change whose payload does not decode
// stops the state machine (every replica would have to guess) and
// changes nothing.
func TestShareGroupConfigUndecodable(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(shareCmd(t, 1, AlterShareGroupConfig{Group: "g", Set: map[string]string{backend.ShareAutoOffsetReset: "earliest"}}))
	bad := append(encodeHeader(nil, CmdShareGroupConfig, 2), `{"group":"g","set":{"share.delivery.count.limit":3}}`...)
	if err, _ := a.apply(bad).(error); !errors.Is(err, backend.ErrStopped) || len(*fatals) != 1 || !errors.Is((*fatals)[0], backend.ErrBadCommand) {
		t.Fatalf("undecodable change: %v, fatals %v", err, *fatals)
	}
	if got := f.ShareGroupConfig("g"); got != (backend.ShareGroupConfig{AutoOffsetReset: "earliest"}) {
		t.Fatalf("settings after the undecodable change: %+v", got)
	}
}

// TestShareGroupConfigSnapshot: the settings survive a snapshot, and a
// backup restored for a new cluster (ForNewCluster); a restore replaces
// them (a snapshot without any forgets those set since); a snapshot
// whose section does not pass the checks a change passes is refused,
// leaving the state as it was.
func TestShareGroupConfigSnapshot(t *testing.T) {
	f, _ := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	empty, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	emptyBytes := persist(t, empty).String()
	empty.Release()
	if strings.Contains(emptyBytes, "share_configs") {
		t.Fatalf("a snapshot without settings has a section: %s", emptyBytes)
	}
	want := map[string]backend.ShareGroupConfig{
		"orders":  {AutoOffsetReset: "earliest", RecordLockDuration: 90 * time.Second, DeliveryCountLimit: 7},
		"billing": {DeliveryCountLimit: 1000},
	}
	a.apply(shareCmd(t, 1, AlterShareGroupConfig{Group: "orders", Set: map[string]string{
		backend.ShareAutoOffsetReset: "earliest", backend.ShareRecordLockDurationMs: "90000", backend.ShareDeliveryCountLimit: "7"}}))
	a.apply(shareCmd(t, 2, AlterShareGroupConfig{Group: "billing", Set: map[string]string{backend.ShareDeliveryCountLimit: "1000"}}))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	data := persist(t, snap).Bytes()
	snap.Release()
	check := func(name string, g *FSM) {
		t.Helper()
		if got := g.ShareGroupConfigs(); len(got) != len(want) {
			t.Fatalf("%s: groups %v", name, got)
		}
		for group, cfg := range want {
			if got := g.ShareGroupConfig(group); got != cfg {
				t.Fatalf("%s: %s: %+v, want %+v", name, group, got, cfg)
			}
		}
	}
	f2, _ := testFSM(t, t.TempDir())
	if err := f2.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	check("restored", f2)
	var rewritten bytes.Buffer
	if err := ForNewCluster(&rewritten, bytes.NewReader(data), time.Unix(1_800_000_000, 0), "r1"); err != nil {
		t.Fatal(err)
	}
	f3, _ := testFSM(t, t.TempDir())
	if err := f3.Restore(&rewritten); err != nil {
		t.Fatal(err)
	}
	check("restored for a new cluster", f3)
	if err := f3.Restore(strings.NewReader(emptyBytes)); err != nil {
		t.Fatal(err)
	}
	if got := f3.ShareGroupConfigs(); len(got) != 0 {
		t.Fatalf("after restoring a snapshot without settings: %v", got)
	}

	manifest := strings.SplitN(string(data), "\n", 2)[0]
	for name, damage := range map[string][2]string{
		"limit out of range": {`"delivery_count_limit":1000`, `"delivery_count_limit":1001`},
		"reset unknown":      {`"auto_offset_reset":"earliest"`, `"auto_offset_reset":"soon"`},
		"group listed twice": {`"group":"billing"`, `"group":"orders"`},
		"group with none":    {`"delivery_count_limit":1000`, `"delivery_count_limit":0`},
	} {
		if !strings.Contains(manifest, damage[0]) {
			t.Fatalf("%s: the manifest lacks %s: %s", name, damage[0], manifest)
		}
		damaged := strings.Replace(string(data), damage[0], damage[1], 1)
		if err := f2.Restore(strings.NewReader(damaged)); err == nil {
			t.Fatalf("%s: restored", name)
		}
		check("after a refused restore ("+name+")", f2)
	}
}
