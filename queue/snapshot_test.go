package queue

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// snapshotGroup builds a group whose state uses every field of the
// snapshot form: acked, delayed, ready, in-flight, dead-pending and
// dead-lettered records, the ring of finished deliveries, append counts,
// expiries and pause.
func snapshotGroup(t *testing.T) *Group {
	t.Helper()
	src := &fakeSource{recs: map[int32]map[int64]RecordInfo{0: {}, 1: {}}, ends: []int64{6, 3}}
	for off := int64(0); off < 6; off++ {
		src.recs[0][off] = RecordInfo{Exists: true, Timestamp: int64(time.Second), Size: 10 + int(off)}
	}
	src.recs[1][0] = RecordInfo{Exists: true, Timestamp: int64(time.Second), Size: 7}
	src.recs[1][1] = RecordInfo{} // a gap
	src.recs[1][2] = RecordInfo{Exists: true, Timestamp: int64(time.Second), Deadline: int64(2 * time.Second), Size: 9}
	cfg := Config{MaxDeliveries: 2, MaxInFlight: 4, AgeLimit: time.Hour, BackoffBase: 100 * time.Millisecond}
	q, err := New("jobs", "workers", cfg, []int64{0, 0}, []byte("0123456789abcdef"), 7, int64(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	now := int64(3 * time.Second)
	res, err := q.Claim(ClaimRequest{Now: now, Index: 10, Max: 5, Ends: src.ends}, src)
	if err != nil || len(res.Deliveries) != 5 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	d := res.Deliveries
	q.Ack(now+1, []Token{d[0].Token})
	q.Nack(now+2, []Nack{{Token: d[1].Token, Error: "transient"}, {Token: d[2].Token, Permanent: true, Error: "bad input"}})
	q.NoteAppend(0, 6, 600, 0)
	q.NoteAppend(1, 3, 90, 0)
	if _, err := q.Claim(ClaimRequest{Now: now + int64(time.Minute), Index: 11, Max: 2, Lease: time.Minute, Ends: src.ends}, src); err != nil {
		t.Fatal(err)
	}
	q.MarkDeadLettered(q.PendingDeadLetters(1))
	q.SetPaused(true)
	return q
}

// TestSnapshotEncoding pins the JSON form of a group's snapshot. Raft
// snapshots hold it, so a data dir written by an earlier build must decode
// the same: testdata/snapshot.json was written by the build before the
// queue package existed and is never rewritten.
func TestSnapshotEncoding(t *testing.T) {
	want, err := os.ReadFile("testdata/snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(snapshotGroup(t).Snapshot(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if !bytes.Equal(got, want) {
		t.Errorf("snapshot encoding changed:\n%s", diffLines(string(want), string(got)))
	}

	// The stored form restores to the same state.
	var s Snapshot
	if err := json.Unmarshal(want, &s); err != nil {
		t.Fatal(err)
	}
	q, err := Restore(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := json.MarshalIndent(q.Snapshot(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if again = append(again, '\n'); !bytes.Equal(again, want) {
		t.Errorf("restored snapshot differs:\n%s", diffLines(string(want), string(again)))
	}
}
