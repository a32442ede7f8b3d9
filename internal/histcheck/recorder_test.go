package histcheck

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRecorderConcurrent(t *testing.T) {
	rec := NewRecorder()
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				call := rec.Begin(Op{Kind: Append, Client: c, Leader: true, Topic: "t", Value: fmt.Sprintf("c%d-%d", c, i)})
				switch i % 3 {
				case 0:
					call.OK(func(op *Op) { op.Offset = int64(i) })
				case 1:
					call.Fail("", errors.New("refused"))
				case 2:
					call.Unknown(errors.New("timeout"))
				}
			}
		}()
	}
	wg.Wait()
	ops := rec.Ops()
	if len(ops) != 400 {
		t.Fatalf("%d ops, want 400", len(ops))
	}
	for i, op := range ops {
		if op.ID != i {
			t.Fatalf("op %d has ID %d", i, op.ID)
		}
		if op.Outcome == Pending || op.Return < op.Call {
			t.Fatalf("op %v not ended properly", &op)
		}
		if op.Outcome != OK && op.Err == "" {
			t.Fatalf("op %v lost its error", &op)
		}
	}
}

func TestRecorderEndTwicePanics(t *testing.T) {
	rec := NewRecorder()
	c := rec.Begin(Op{Kind: Read})
	c.OK(nil)
	defer func() {
		if recover() == nil {
			t.Fatal("a second end did not panic")
		}
	}()
	c.Unknown(nil)
}

func TestRecorderAt(t *testing.T) {
	rec := NewRecorder()
	d := rec.At(time.Now().Add(time.Second))
	if d < int64(900*time.Millisecond) || d > int64(2*time.Second) {
		t.Fatalf("At(now+1s) = %v", time.Duration(d))
	}
}

// sampleOps has one call of every kind with every field set that the kind
// uses.
func sampleOps() []Op {
	return []Op{
		{ID: 0, Kind: Append, Client: 1, Node: "n1", Leader: true, Call: 1, Return: 5, Outcome: OK, Topic: "t", Partition: 2, Offset: 7, Value: "v", Key: "k", Duplicate: true},
		{ID: 1, Kind: Read, Client: 2, Node: "n2", Call: 3, Return: 9, Outcome: OK, Topic: "t", Partition: 2, Offset: 9, OutOfRange: true, End: 8},
		{ID: 2, Kind: Scan, Client: 0, Node: "n3", Call: 100, Return: 110, Outcome: OK, Topic: "t", Partition: 2, Records: []Record{{Offset: 0, Value: "a", Key: "k"}}},
		{ID: 3, Kind: Join, Client: 4, Call: 10, Return: 11, Outcome: OK, Group: "g", Member: "m", Generation: 3, Assigned: []TopicPartition{{Topic: "t", Partition: 1}}},
		{ID: 4, Kind: Commit, Client: 4, Call: 12, Return: 14, Outcome: Failed, Reason: Fenced, Err: "stale generation", Group: "g", Member: "m", Generation: 3, Topic: "t", Partition: 1, Offset: 40},
		{ID: 5, Kind: FetchCommitted, Client: 4, Call: 15, Return: 16, Outcome: Unknown, Group: "g", Topic: "t", Partition: 1, Offset: NoOffset},
		{ID: 6, Kind: Reset, Client: 5, Call: 15, Return: 20, Outcome: OK, Group: "g", Topic: "t", Partition: 1, Offset: NoOffset, Generation: 4},
		{ID: 7, Kind: Claim, Client: 6, Call: 21, Return: 22, Outcome: OK, Group: "q", Topic: "t", Deliveries: []Delivery{{Topic: "t", Partition: 0, Offset: 3, Token: "tok", Count: 2, Deadline: 99}}},
		{ID: 8, Kind: Ack, Client: 6, Call: 23, Return: 24, Outcome: Failed, Reason: Stale, Group: "q", Topic: "t", Offset: 3, Token: "tok"},
		{ID: 9, Kind: Nack, Client: 6, Call: 25, Outcome: Pending, Group: "q", Topic: "t", Offset: 3, Token: "tok", Permanent: true},
		{ID: 10, Kind: Extend, Client: 6, Call: 26, Return: 27, Outcome: OK, Group: "q", Topic: "t", Offset: 3, Token: "tok", Deadline: 200},
		{ID: 11, Kind: QueueFinal, Client: 0, Call: 300, Return: 301, Outcome: OK, Group: "q", Topic: "t", Offset: 3, State: DeadLettered, DeadLetters: 1},
		{ID: 12, Kind: RemoveNode, Client: 7, Call: 30, Return: 40, Outcome: OK, Target: "n3"},
		{ID: 13, Kind: AddNode, Client: 7, Call: 50, Return: 60, Outcome: OK, Target: "n3"},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	ops := sampleOps()
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := SaveFile(path, ops); err != nil {
		t.Fatal(err)
	}
	got, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ops) {
		t.Fatalf("round trip changed the history:\n got %+v\nwant %+v", got, ops)
	}
}

// FuzzLoad: Load never panics, and what it accepts saves and loads back
// the same and can be checked.
func FuzzLoad(f *testing.F) {
	var buf bytes.Buffer
	if err := Save(&buf, sampleOps()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"format":"logd-histcheck/1"}` + "\n" + `{"id":3,"kind":"append","call":1,"return":2,"outcome":"ok","value":"v","offset":-4}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := Load(bytes.NewReader(b))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Save(&out, ops); err != nil {
			t.Fatal(err)
		}
		again, err := Load(&out)
		if err != nil || !reflect.DeepEqual(normalize(again), normalize(ops)) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, again, ops)
		}
		CheckAll(ops, Options{LinearizabilityTimeout: 100 * time.Millisecond})
	})
}

// normalize makes empty and nil slices alike, as JSON does.
func normalize(ops []Op) []Op {
	out := append([]Op(nil), ops...)
	for i := range out {
		if len(out[i].Records) == 0 {
			out[i].Records = nil
		}
		if len(out[i].Deliveries) == 0 {
			out[i].Deliveries = nil
		}
		if len(out[i].Assigned) == 0 {
			out[i].Assigned = nil
		}
	}
	return out
}

func TestLoadRejects(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		line     int
		format   bool
	}{
		{name: "empty", in: "", line: 1, format: true},
		{name: "no header", in: `{"id":0,"kind":"append"}` + "\n", line: 1, format: true},
		{name: "other format", in: `{"format":"logd-histcheck/9"}` + "\n", line: 1, format: true},
		{name: "bad op", in: `{"format":"logd-histcheck/1"}` + "\n" + `{"id":"zero"}` + "\n", line: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := Load(strings.NewReader(tc.in))
			var le *LineError
			if !errors.As(err, &le) || le.Line != tc.line || errors.Is(err, ErrFormat) != tc.format {
				t.Fatalf("Load = %v, %v; want a LineError at line %d (ErrFormat %v)", ops, err, tc.line, tc.format)
			}
		})
	}
	const head = `{"format":"logd-histcheck/1"}` + "\n"
	for _, tc := range []struct{ name, in string }{
		{"unknown kind", head + `{"id":0,"kind":"delete","call":1,"return":2,"outcome":"ok"}`},
		{"unknown outcome", head + `{"id":0,"kind":"read","call":1,"return":2,"outcome":"maybe"}`},
		{"unknown reason", head + `{"id":0,"kind":"ack","call":1,"return":2,"outcome":"failed","reason":"tired"}`},
		{"return before call", head + `{"id":0,"kind":"read","call":5,"return":2,"outcome":"ok"}`},
		{"an ID twice", head + `{"id":0,"kind":"read","call":1,"return":2,"outcome":"ok"}` + "\n" + `{"id":0,"kind":"read","call":1,"return":2,"outcome":"ok"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := Load(strings.NewReader(tc.in))
			var oe *OpError
			if !errors.As(err, &oe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Load = %v, %v; want an OpError wrapping ErrInvalid", ops, err)
			}
		})
	}
	bad := []Op{{Kind: "delete"}}
	if vs := CheckAll(bad, Options{}); len(vs) != 1 || vs[0].Checker != "history" || vs[0].OK() {
		t.Fatalf("CheckAll of an invalid history: %s", Report(vs))
	}
	var buf bytes.Buffer
	if err := Save(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if ops, err := Load(&buf); err != nil || len(ops) != 0 {
		t.Fatalf("empty history: %v, %v", ops, err)
	}
}
