package replication

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestCompareCuts: a data group's cut must hold, as placed, every
// partition the meta group's cut places in it (else it is missing them:
// not adopted yet, or the topic changed since), and nothing the meta
// group made after its cut (ahead: a later incarnation, a later
// placement, a topic created after it); a topic the meta group deleted
// before its cut is neither.
func TestCompareCuts(t *testing.T) {
	meta := catchup.CutInfo{Index: 20, Topics: []fsm.SnapshotTopic{
		{Name: "t", CreateIndex: 5, Partitions: 3, Placement: []uint64{1, 1, 2}, PlacementEpoch: 4},
		{Name: "other", CreateIndex: 6, Partitions: 1, Placement: []uint64{2}, PlacementEpoch: 4},
		{Name: "meta", CreateIndex: 2, Partitions: 1, Hosted: []int32{0}},
	}}
	t5 := func(epoch uint64, hosted ...int32) fsm.SnapshotTopic {
		return fsm.SnapshotTopic{Name: "t", CreateIndex: 5, Partitions: 3, Placement: []uint64{1, 1, 2}, PlacementEpoch: epoch, Hosted: hosted}
	}
	for _, tc := range []struct {
		name           string
		group          []fsm.SnapshotTopic
		missing, ahead string
	}{
		{name: "as placed", group: []fsm.SnapshotTopic{t5(4, 0, 1)}},
		{name: "not adopted", group: nil, missing: "[topic t~5 at placement epoch 4]"},
		{name: "a partition not adopted", group: []fsm.SnapshotTopic{t5(4, 0)}, missing: "[topic t~5 at placement epoch 4]"},
		{name: "an earlier placement", group: []fsm.SnapshotTopic{t5(3, 0)}, missing: "[topic t~5 at placement epoch 4]"},
		{name: "a later incarnation", group: []fsm.SnapshotTopic{{Name: "t", CreateIndex: 25, Hosted: []int32{0}}}, ahead: "[topic t~25]"},
		{name: "a later placement", group: []fsm.SnapshotTopic{t5(21, 0, 1)}, ahead: "[topic t~5 at placement epoch 21]"},
		{name: "a topic created after the cut", group: []fsm.SnapshotTopic{t5(4, 0, 1), {Name: "new", CreateIndex: 22}}, ahead: "[topic new~22]"},
		{name: "a topic deleted before the cut", group: []fsm.SnapshotTopic{t5(4, 0, 1), {Name: "gone", CreateIndex: 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			missing, ahead := compareCuts(meta, catchup.CutInfo{Group: 1, Topics: tc.group})
			if got := fmt.Sprint(missing); len(missing) > 0 != (tc.missing != "") || len(missing) > 0 && got != tc.missing {
				t.Errorf("missing %s, want %q", got, tc.missing)
			}
			if got := fmt.Sprint(ahead); len(ahead) > 0 != (tc.ahead != "") || len(ahead) > 0 && got != tc.ahead {
				t.Errorf("ahead %s, want %q", got, tc.ahead)
			}
		})
	}
}

// TestHeldCuts: a held cut's body is read in chunks, each where the last
// ended (any other offset is refused and reads nothing); released, or
// once the node closes, its files are closed and it is read no more.
func TestHeldCuts(t *testing.T) {
	var h heldCuts
	closed := 0
	cut := func(body string) *catchup.Cut {
		return catchup.NewCut(catchup.CutInfo{}, strings.NewReader(body), func() error { closed++; return nil })
	}
	id, err := h.hold(cut("0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := h.read(id, 0, 4); err != nil || string(c.Data) != "0123" || c.EOF {
		t.Fatalf("first chunk %+v, %v", c, err)
	}
	if _, err := h.read(id, 0, 4); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("a read at an earlier offset: %v", err)
	}
	if c, err := h.read(id, 4, 100); err != nil || string(c.Data) != "456789" || !c.EOF {
		t.Fatalf("last chunk %+v, %v", c, err)
	}
	if _, err := h.get(id); err != nil {
		t.Fatalf("a touch: %v", err)
	}
	h.release(id)
	if closed != 1 {
		t.Fatalf("released: %d closed", closed)
	}
	if _, err := h.read(id, 10, 4); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("a read of a released cut: %v", err)
	}
	if _, err := h.hold(cut("x")); err != nil {
		t.Fatal(err)
	}
	h.closeAll()
	if closed != 2 {
		t.Fatalf("closed by the node's close: %d closed", closed)
	}
	if _, err := h.hold(cut("y")); !errors.Is(err, backend.ErrShutdown) || closed != 3 {
		t.Fatalf("a cut held after the node closed: %v, %d closed", err, closed)
	}
}
