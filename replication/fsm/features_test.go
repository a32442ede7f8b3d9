package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/logd-dev/logd/backend"
)

// TestCommandTable: every row is complete, names are unique, and every
// kind and payload version this build has is within its feature levels;
// all kinds that existed before feature levels are at BaseLevel, the
// security kinds at SecurityLevel, group-set-offsets at ExternalGroupsLevel,
// redrive at RedriveLevel, producer-init at ProducerLevel, the SCRAM kinds
// at SCRAMLevel, queue-release at QueueReleaseLevel, partition-adopt and
// data-groups at DataGroupLevel, queue-set-starts and queue-delete at
// QueueStartsLevel, append-many at CoalesceLevel, share-group-config at
// ShareConfigLevel, group-place and group-hosted at HashedGroupsLevel.
func TestCommandTable(t *testing.T) {
	names := map[string]CommandType{}
	rows := 0
	for i := range commands {
		c := &commands[i]
		if c.decode == nil && c.apply == nil && c.name == "" && c.versions == nil {
			continue // not a kind
		}
		rows++
		ct := CommandType(i)
		if c.decode == nil || c.apply == nil || c.name == "" || len(c.versions) == 0 {
			t.Fatalf("row %d is incomplete: %+v", i, c)
		}
		if other, ok := names[c.name]; ok {
			t.Fatalf("%s is the name of %d and %d", c.name, other, i)
		}
		names[c.name] = ct
		if ct.String() != c.name {
			t.Fatalf("%d is named %q", i, ct)
		}
		want := BaseLevel
		switch {
		case ct >= CmdTokenCreate && ct <= CmdACLDelete:
			want = SecurityLevel
		case ct == CmdGroupSetOffsets:
			want = ExternalGroupsLevel
		case ct == CmdCreatePartitions:
			want = PartitionsLevel
		case ct == CmdRedrive:
			want = RedriveLevel
		case ct == CmdProducerInit:
			want = ProducerLevel
		case ct == CmdSCRAMSet || ct == CmdSCRAMDelete:
			want = SCRAMLevel
		case ct == CmdQueueRelease:
			want = QueueReleaseLevel
		case ct == CmdPartitionAdopt, ct == CmdDataGroups:
			want = DataGroupLevel
		case ct == CmdQueueSetStarts, ct == CmdQueueDelete:
			want = QueueStartsLevel
		case ct == CmdAppendMany:
			want = CoalesceLevel
		case ct == CmdShareGroupConfig:
			want = ShareConfigLevel
		case ct == CmdGroupPlace, ct == CmdGroupHosted:
			want = HashedGroupsLevel
		}
		if c.level != want {
			t.Errorf("%s: level %d, want %d", c.name, c.level, want)
		}
		for _, v := range c.versions {
			if v.level < BaseLevel || v.level > Level {
				t.Errorf("%s version %d: level %d outside [%d, %d]", c.name, v.version, v.level, BaseLevel, Level)
			}
		}
	}
	if rows != 41 {
		t.Fatalf("%d kinds in the table, want 41", rows)
	}
}

func TestEntryLevel(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	keyed := encodeAppend(now, Append{Topic: "t", Batches: []PartitionBatch{keyed(0, mustBatch(t, "a"), "k")}})
	for _, tc := range []struct {
		name string
		data []byte
		want FeatureLevel
		err  error
	}{
		{name: "json", data: createCmd(t, "t", 1, now), want: BaseLevel},
		{name: "sealed", data: sealEntry(createCmd(t, "t", 1, now)), want: BaseLevel},
		{name: "append v3", data: keyed, want: BaseLevel},
		{name: "unknown kind", data: []byte{99, 1, 0, 0, 0, 0, 0, 0, 0, 0}, err: backend.ErrUnknownCommand},
		{name: "unknown version", data: append([]byte{byte(CmdCreateTopic), 7}, make([]byte, 8)...), err: backend.ErrUnknownCommand},
		{name: "short", data: []byte{1, 1}, err: backend.ErrBadCommand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := EntryLevel(tc.data)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %d, %v; want %v", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestNodeRegisterFeatureLevel: a registration written before feature
// levels (no field) still decodes, counts as BaseLevel and encodes as it
// always did; a registered level survives a snapshot, and a snapshot
// without levels restores them as BaseLevel.
func TestNodeRegisterFeatureLevel(t *testing.T) {
	old := append(encodeHeader(nil, CmdNodeRegister, 1), `{"id":"old","api_address":"old:1"}`...)
	if again := mustJSON(t, CmdNodeRegister, 1, NodeRegister{ID: "old", APIAddress: "old:1"}); string(again) != string(old) {
		t.Fatalf("a registration without a level encodes as\n%s\nnot\n%s", again, old)
	}
	f, fatals := testFSM(t, t.TempDir())
	f.ApplyBatch(entries(old, mustJSON(t, CmdNodeRegister, 2, NodeRegister{ID: "new", APIAddress: "new:1", FeatureLevel: 2})))
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
	if got := f.NodeFeatureLevel("old"); got != BaseLevel {
		t.Fatalf("old registration: level %d", got)
	}
	if got := f.NodeFeatureLevel("unknown"); got != BaseLevel {
		t.Fatalf("unregistered node: level %d", got)
	}
	if got := f.NodeFeatureLevel("new"); got != 2 {
		t.Fatalf("new registration: level %d", got)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	f2, _ := testFSM(t, t.TempDir())
	if err := f2.Restore(sink); err != nil {
		t.Fatal(err)
	}
	if f2.NodeFeatureLevel("new") != 2 || f2.NodeFeatureLevel("old") != BaseLevel {
		t.Fatalf("restored registry %+v", f2.Nodes())
	}
	// A snapshot of a build before feature levels.
	f3, _ := testFSM(t, t.TempDir())
	if err := f3.Restore(strings.NewReader(`{"version":2,"index":5,"now":1,"topics":null,"nodes":{"version":1,"nodes":[{"id":"a","api_address":"a:1"}]}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if addr, ok := f3.NodeAddress("a"); !ok || addr != "a:1" || f3.NodeFeatureLevel("a") != BaseLevel {
		t.Fatalf("registry from an older snapshot %+v", f3.Nodes())
	}
}
