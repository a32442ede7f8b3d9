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
	q.NoteAppend(Appended{Partition: 0, Base: 0, Records: 6, BatchBytes: 600})
	q.NoteAppend(Appended{Partition: 1, Base: 0, Records: 3, BatchBytes: 90})
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
// queue package existed and is never rewritten. Fields added since (the
// drain samples) are left out of the comparison: that file pins the
// fields it has; testdata/snapshot_exact.json pins the later ones.
func TestSnapshotEncoding(t *testing.T) {
	want, err := os.ReadFile("testdata/snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshotGroup(t).Snapshot()
	snap.Drain = nil
	got, err := json.MarshalIndent(snap, "", "  ")
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

// TestSnapshotEncodingExact pins the fields added with exact backlog bytes
// and the drain rate: testdata/snapshot_exact.json (rewritten by -rewrite
// only when a field is added, never when one changes).
func TestSnapshotEncodingExact(t *testing.T) {
	q := snapshotGroup(t)
	src := &fakeSource{recs: map[int32]map[int64]RecordInfo{0: {}, 1: {}}}
	for off := int64(0); off < 8; off++ {
		src.recs[0][off] = RecordInfo{Exists: true, Timestamp: int64(time.Second), Size: 10 + int(off)}
	}
	src.recs[1][0] = RecordInfo{Exists: true, Size: 7}
	src.recs[1][2] = RecordInfo{Exists: true, Size: 9}
	if err := q.SetExactBytes(src, []int64{8, 3}, int64(time.Minute)); err != nil {
		t.Fatal(err)
	}
	q.NoteAppend(Appended{Partition: 0, Base: 8, Records: 2, BatchBytes: 100, RecordBytes: 33, At: int64(2 * time.Minute)})
	q.Ack(int64(time.Hour), nil)
	got, err := json.MarshalIndent(q.Snapshot(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *rewrite {
		if err := os.WriteFile("testdata/snapshot_exact.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/snapshot_exact.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("snapshot encoding changed:\n%s", diffLines(string(want), string(got)))
	}
	var s Snapshot
	if err := json.Unmarshal(want, &s); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(s)
	if err != nil {
		t.Fatal(err)
	}
	if !r.ExactBytes() || r.Backlog([]int64{10, 3}) != q.Backlog([]int64{10, 3}) {
		t.Fatalf("restored backlog %+v, want %+v", r.Backlog([]int64{10, 3}), q.Backlog([]int64{10, 3}))
	}
	rr, rb := r.DrainRate(int64(2 * time.Hour))
	qr, qb := q.DrainRate(int64(2 * time.Hour))
	if rr != qr || rb != qb {
		t.Fatalf("restored drain rate %v %v, want %v %v", rr, rb, qr, qb)
	}
}
