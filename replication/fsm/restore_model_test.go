package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/queue"
)

// faultLong reports whether the long fault runs are on (make fault sets
// LOGD_FAULT_LONG=1): the model tests then draw more scripts.
func faultLong() bool { return os.Getenv("LOGD_FAULT_LONG") == "1" }

// dirFetcher is a SegmentFetcher that copies segments from another FSM's
// partition logs, as package replication/catchup does from a peer over
// HTTP: the .meta file and the first Bytes of the data file, staged and
// checked by log.StageSegment, then installed.
type dirFetcher struct {
	src *FSM
	// failAfter, if positive, is how many fetches succeed before every
	// later one fails, as when the peers stop answering midway.
	failAfter *int
}

func (d dirFetcher) FetchSegments(req FetchRequest) error {
	if d.failAfter != nil {
		if *d.failAfter == 0 {
			return errors.New("peer gone")
		}
		*d.failAfter--
	}
	var bases []int64
	for _, s := range req.Segments {
		data, meta, err := d.src.SegmentFiles(req.Topic, req.TopicIndex, req.Partition, s.Base)
		if err != nil {
			return err
		}
		mb, err := os.ReadFile(meta)
		if err != nil {
			return err
		}
		f, err := os.Open(data)
		if err != nil {
			return err
		}
		err = log.StageSegment(req.Dir, req.Log, log.SegmentInfo{BaseOffset: s.Base, EndOffset: s.End, Bytes: s.Bytes}, mb, f)
		f.Close()
		if err != nil {
			return err
		}
		bases = append(bases, s.Base)
	}
	return log.InstallStaged(req.Dir, req.Log, req.Keep, bases)
}

// modelScript is a random run of appends to a topic of three partitions
// with small segments and a small idempotency window: keys repeat, expire
// and are evicted, entries span partitions, and Raft's own entries come
// between commands.
func modelScript(t *testing.T, rng *rand.Rand, n int, w modelWindow) []Entry {
	now := int64(1_700_000_000_000_000_000)
	cmds := []Entry{{Index: 1, Command: true, Data: mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "m", Partitions: 3, Config: map[string]string{
		ConfigSegmentBytes: "1024", ConfigIdempotencyWindowMs: strconv.Itoa(w.ms), ConfigIdempotencyMaxKeys: strconv.Itoa(w.maxKeys),
	}})}}
	seq := 0
	for i := 2; len(cmds) < n; i++ {
		now += int64(rng.IntN(6)) * 1e6
		if rng.IntN(10) == 0 {
			cmds = append(cmds, Entry{Index: uint64(i)}) // a no-op or configuration entry
			continue
		}
		var a Append
		a.Topic = "m"
		for _, p := range rng.Perm(3)[:1+rng.IntN(2)] {
			var values, keys []string
			for range 1 + rng.IntN(3) {
				seq++
				values = append(values, "v"+strconv.Itoa(seq))
				k := ""
				if rng.IntN(3) > 0 {
					k = fmt.Sprintf("k%d%s", rng.IntN(w.keys), w.pad)
				}
				keys = append(keys, k)
			}
			a.Batches = append(a.Batches, keyed(int32(p), mustBatch(t, values...), keys...))
		}
		cmds = append(cmds, Entry{Index: uint64(i), Command: true, Data: encodeAppend(now, a)})
	}
	return cmds
}

// modelWindow shapes a model script's idempotency keys: the topic's
// window and bound, how many distinct keys it draws from, and padding that
// lengthens every key.
type modelWindow struct {
	ms, maxKeys, keys int
	pad               string
}

// modelSource returns a replica that has applied script[:s], half the
// time as a deposed leader does: it had applied past s, installed an older
// snapshot (its logs kept what they held past it) and replayed up to s, so
// its logs hold more than its state machine and the segments its snapshot
// lists end past the snapshot's end offsets.
func modelSource(t *testing.T, rng *rand.Rand, script []Entry, s int) *FSM {
	t.Helper()
	src, _ := testFSM(t, t.TempDir())
	if rng.IntN(2) == 0 {
		src.ApplyBatch(script[:s])
		return src
	}
	older, _ := testFSM(t, t.TempDir())
	o := s - 1 - rng.IntN(s/4)
	older.ApplyBatch(script[:o])
	snap, err := older.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	src.ApplyBatch(script[:min(len(script), s+1+rng.IntN(s/4))])
	if err := src.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	older.Close()
	src.ApplyBatch(script[o:s])
	return src
}

// modelSnapshot returns a source replica (modelSource) and the snapshot
// it took at s, written while it went on applying, as Raft persists a
// snapshot beside applies.
func modelSnapshot(t *testing.T, rng *rand.Rand, script []Entry, s int) (*FSM, *bytes.Buffer) {
	t.Helper()
	src := modelSource(t, rng, script, s)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	persisted := make(chan error, 1)
	go func() { persisted <- snap.Persist(&buf) }()
	for _, e := range script[s:min(len(script), s+len(script)/20)] {
		src.apply(e)
	}
	if err := <-persisted; err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return src, &buf
}

// eachRestore installs, three times, a snapshot of script taken at a
// random index s (modelSnapshot) on a fresh replica that applied none of
// it, one that applied less than s, one that applied exactly s and one
// that applied more, and calls check with the replica, which then applies
// script[s:] itself. A first install may fail midway (its fetches stop),
// and is made again, as Raft does.
func eachRestore(t *testing.T, rng *rand.Rand, script []Entry, check func(s, held int, f *FSM, fatals *[]error)) {
	t.Helper()
	for range 3 {
		s := len(script)/4 + rng.IntN(len(script)/2)
		src, buf := modelSnapshot(t, rng, script, s)
		d := len(script) / 16
		for _, held := range []int{0, s - 1 - rng.IntN(d), s, s + 1 + rng.IntN(d)} {
			f, fatals := testFSM(t, t.TempDir())
			f.ApplyBatch(script[:held])
			failAfter := rng.IntN(3)
			f.catchUp.fetcher = dirFetcher{src: src, failAfter: &failAfter}
			if err := f.Restore(bytes.NewReader(buf.Bytes())); err != nil {
				f.catchUp.fetcher = dirFetcher{src: src}
				if err := f.Restore(bytes.NewReader(buf.Bytes())); err != nil {
					t.Fatalf("snapshot %d, held %d: restore: %v", s, held, err)
				}
			}
			check(s, held, f, fatals)
			f.Close()
		}
		src.Close()
	}
}

// outcome is an entry's result as a replica must reproduce it.
func outcome(r any) string {
	switch r := r.(type) {
	case nil:
		return "-"
	case AppendResult:
		return fmt.Sprint(r.BaseOffsets)
	case error:
		switch {
		case errors.Is(r, backend.ErrDedupRace):
			return "dedup race"
		case errors.Is(r, backend.ErrInvalidArgument):
			return "invalid"
		}
		return "error " + r.Error()
	}
	return fmt.Sprintf("%T", r)
}

// TestRestoreReplaysLikeTheLeader: a follower that installs a snapshot
// and applies the entries after it ends in the state of a replica that
// applied every entry, whether it held less than the snapshot (its
// segments completed from a peer), more (it had applied past the
// snapshot's index, as a deposed leader does), or nothing. Every entry
// after the snapshot gets the result it got on the replica that applied
// them all: the same offsets, the same idempotency refusals. The snapshot
// is written while its source applies more entries, as Raft persists it.
func TestRestoreReplaysLikeTheLeader(t *testing.T) {
	// Small windows that keys keep leaving (expiry, the bound), and one
	// that holds thousands of long keys: its ring and key arena span
	// several chunks and blocks, which a snapshot's frozen view shares
	// with the window that goes on changing.
	small := modelWindow{ms: 40, maxKeys: 12, keys: 30}
	large := modelWindow{ms: 60_000, maxKeys: 1500, keys: 4000, pad: strings.Repeat("-", 60)}
	type modelCase struct {
		w       modelWindow
		entries int
	}
	cases := []modelCase{{small, 240}, {small, 240}, {large, 2400}}
	if faultLong() {
		cases = []modelCase{{small, 240}, {small, 240}, {small, 240}, {small, 240}, {small, 240}, {small, 240}, {large, 2400}, {large, 2400}, {large, 2400}}
	}
	for seed, c := range cases {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			script := modelScript(t, rng, c.entries, c.w)
			ref, fatals := testFSM(t, t.TempDir())
			want := make([]string, len(script))
			for i, r := range ref.ApplyBatch(script) {
				want[i] = outcome(r)
			}
			if len(*fatals) > 0 {
				t.Fatal(*fatals)
			}
			eachRestore(t, rng, script, func(s, held int, f *FSM, fatals *[]error) {
				for i, r := range f.ApplyBatch(script[s:]) {
					if got := outcome(r); got != want[s+i] {
						t.Fatalf("snapshot %d, held %d: entry %d: %s, the replica that applied every entry got %s", s, held, s+i+1, got, want[s+i])
					}
				}
				if len(*fatals) > 0 {
					t.Fatalf("snapshot %d, held %d: %v", s, held, *fatals)
				}
				for p := range int32(3) {
					if got, w := readAll(t, f, "m", p), readAll(t, ref, "m", p); fmt.Sprint(got) != fmt.Sprint(w) {
						t.Fatalf("snapshot %d, held %d: partition %d holds %v, want %v", s, held, p, got, w)
					}
				}
			})
		})
	}
}

// workScript is a random run of a queue group and a consumer group over
// one topic, built against ref (which applies each entry as it is made, so
// later entries can use its answers: tokens to ack, generations to commit
// at): appends, claims, acks of live and stale tokens, nacks, lease
// extensions, joins, heartbeats, commits and leaves, with time moving so
// leases and sessions run out. It returns the entries and each one's
// outcome on ref.
func workScript(t *testing.T, rng *rand.Rand, ref *FSM, n int) ([]Entry, []string) {
	now := qnow
	var script []Entry
	var want []string
	apply := func(cmd []byte) any {
		e := Entry{Index: uint64(len(script) + 1), Command: true, Data: cmd}
		script = append(script, e)
		r := ref.apply(e)
		want = append(want, workOutcome(r))
		return r
	}
	apply(createCmd(t, "w", 2, now))
	apply(queueCmd(t, CmdQueueCreate, now, QueueCreate{Topic: "w", Group: "q", Secret: []byte("s"), Config: queue.Config{MaxDeliveries: 3}}))
	var tokens []queue.Token
	ms := int64(time.Millisecond)
	for seq := 0; len(script) < n; seq++ {
		now += int64(rng.IntN(120)) * ms
		member := "m" + strconv.Itoa(rng.IntN(3))
		switch rng.IntN(10) {
		case 0, 1:
			apply(appendCmd(t, now, "w", int32(rng.IntN(2)), "j"+strconv.Itoa(seq)))
		case 2:
			r := apply(queueCmd(t, CmdQueueClaim, now, QueueClaim{Topic: "w", Group: "q", Max: 1 + int32(rng.IntN(3)), Lease: time.Duration(100+rng.IntN(900)) * time.Millisecond, Worker: member}))
			if c, ok := r.(backend.QueueClaimResult); ok {
				for _, rec := range c.Records {
					tokens = append(tokens, rec.Token)
				}
			}
		case 3, 4:
			if len(tokens) == 0 {
				continue
			}
			tok := tokens[rng.IntN(len(tokens))]
			switch rng.IntN(3) {
			case 0:
				apply(queueCmd(t, CmdQueueAck, now, QueueAck{Topic: "w", Group: "q", Tokens: []queue.Token{tok}}))
			case 1:
				apply(queueCmd(t, CmdQueueNack, now, QueueNack{Topic: "w", Group: "q", Nacks: []queue.Nack{{Token: tok, Permanent: rng.IntN(4) == 0, Error: "no"}}}))
			default:
				apply(queueCmd(t, CmdQueueExtend, now, QueueExtend{Topic: "w", Group: "q", Lease: time.Second, Tokens: []queue.Token{tok}}))
			}
		case 5:
			apply(mustJSON(t, CmdGroupJoin, now, GroupJoin{Group: "g", Member: member, Topics: []string{"w"}, SessionTimeoutMs: 800}))
		case 6, 7:
			apply(mustJSON(t, CmdGroupHeartbeat, now, GroupHeartbeat{Group: "g", Member: member}))
		case 8:
			gen := int64(0)
			if g, err := ref.ConsumerGroup("g"); err == nil {
				gen = g.Generation - int64(rng.IntN(2))
			}
			p := int32(rng.IntN(2))
			end := int64(0)
			if part, err := ref.Partition("w", p); err == nil {
				end = part.Log().EndOffset()
			}
			// Up to two past the end: refused, or (a reset) cut to the end,
			// where the state machine's end is at this entry, whatever the
			// log holds.
			tp := group.TopicPartition{Topic: "w", Partition: p}
			if rng.IntN(5) == 0 {
				apply(mustJSON(t, CmdGroupResetOffsets, now, GroupResetOffsets{Group: "g", Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: end + rng.Int64N(3)}}}))
				continue
			}
			apply(mustJSON(t, CmdGroupCommit, now, GroupCommit{Group: "g", Member: member, Generation: gen,
				Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: rng.Int64N(end + 3)}}}))
		default:
			if rng.IntN(4) == 0 {
				apply(mustJSON(t, CmdGroupLeave, now, GroupLeave{Group: "g", Member: member}))
			} else {
				script = append(script, Entry{Index: uint64(len(script) + 1)}) // a Raft no-op
				want = append(want, workOutcome(nil))
			}
		}
	}
	return script, want
}

// workOutcome is an entry's result as every replica must reproduce it,
// errors by their text.
func workOutcome(r any) string {
	if err, ok := r.(error); ok {
		return "error: " + err.Error()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Sprintf("%T %v", r, err)
	}
	return string(b)
}

// TestRestoreReplaysQueuesAndGroupsLikeTheLeader is
// TestRestoreReplaysLikeTheLeader for queue groups and consumer groups:
// after a snapshot install, every claim hands out the records and tokens,
// every ack, nack and extension has the outcome, and every group call the
// answer, that a replica applying every entry gave.
func TestRestoreReplaysQueuesAndGroupsLikeTheLeader(t *testing.T) {
	seeds := 3
	if faultLong() {
		seeds = 12
	}
	for seed := range seeds {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			ref, fatals := testFSM(t, t.TempDir())
			script, want := workScript(t, rng, ref, 600)
			if len(*fatals) > 0 {
				t.Fatal(*fatals)
			}
			eachRestore(t, rng, script, func(s, held int, f *FSM, fatals *[]error) {
				for i, e := range script[s:] {
					if got := workOutcome(f.apply(e)); got != want[s+i] {
						t.Fatalf("snapshot %d, held %d: entry %d: %s\nthe replica that applied every entry got %s", s, held, s+i+1, got, want[s+i])
					}
				}
				if len(*fatals) > 0 {
					t.Fatalf("snapshot %d, held %d: %v", s, held, *fatals)
				}
				if got, w := groupsJSON(t, f), groupsJSON(t, ref); got != w {
					t.Fatalf("snapshot %d, held %d: groups\n%s\nwant\n%s", s, held, got, w)
				}
			})
		})
	}
}
