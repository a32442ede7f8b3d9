package histcheck

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// op builds a call for hand-made histories.
func op(kind Kind, client int, call, ret int64, outcome Outcome, set func(*Op)) Op {
	o := Op{Kind: kind, Client: client, Node: "n1", Leader: true, Call: call, Return: ret, Outcome: outcome, Topic: "t"}
	if set != nil {
		set(&o)
	}
	return o
}

func appendOp(client int, call, ret int64, outcome Outcome, value string, offset int64) Op {
	return op(Append, client, call, ret, outcome, func(o *Op) { o.Value, o.Offset = value, offset })
}

func readOp(client int, call, ret int64, offset int64, value string, end int64) Op {
	return op(Read, client, call, ret, OK, func(o *Op) {
		o.Offset, o.End = offset, end
		if value == "" {
			o.OutOfRange = true
		} else {
			o.Value = value
		}
	})
}

func numbered(ops ...Op) []Op {
	for i := range ops {
		ops[i].ID = i
	}
	return ops
}

// wantVerdict runs a checker and requires OK, or a violation containing
// each of want.
func wantVerdict(t *testing.T, v Verdict, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if !v.OK() {
			t.Fatalf("want ok, got\n%s", v.String())
		}
		return
	}
	if v.OK() {
		t.Fatalf("want a violation with %q, got\n%s", want, v.String())
	}
	s := v.String()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Fatalf("want %q in\n%s", w, s)
		}
	}
	t.Logf("as expected:\n%s", s)
}

func TestLinearizableHandMade(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string // empty: linearizable
	}{
		{
			name: "concurrent appends and reads",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 1),
				appendOp(2, 0, 10, OK, "b", 0),
				readOp(3, 5, 8, 1, "a", 2),
				readOp(3, 9, 12, 0, "b", 2),
				readOp(4, 0, 3, 0, "", 0),
			),
		},
		{
			name: "an unknown append seen by a read",
			ops: numbered(
				appendOp(1, 0, 10, Unknown, "a", 0),
				readOp(2, 20, 30, 0, "a", 1),
				appendOp(2, 31, 40, OK, "b", 1),
			),
		},
		{
			name: "an unknown append that took an offset nobody read",
			ops: numbered(
				appendOp(1, 0, 10, Unknown, "a", 0),
				appendOp(2, 20, 30, OK, "b", 1),
			),
		},
		{
			name: "an unknown append takes effect after its client gave up",
			ops: numbered(
				appendOp(1, 0, 10, Unknown, "a", 0),
				readOp(2, 20, 30, 0, "", 0),
				readOp(2, 40, 50, 0, "a", 1),
			),
		},
		{
			name: "a keyed retry answered with the first attempt's offset",
			ops: numbered(
				op(Append, 1, 0, 10, Unknown, func(o *Op) { o.Value, o.Key = "a", "k" }),
				appendOp(2, 11, 12, OK, "b", 1),
				op(Append, 1, 20, 30, OK, func(o *Op) { o.Value, o.Key, o.Offset, o.Duplicate = "a", "k", 0, true }),
			),
		},
		{
			name: "failed calls and follower reads are left out",
			ops: numbered(
				appendOp(1, 0, 10, Failed, "x", 0),
				appendOp(1, 11, 20, OK, "a", 0),
				op(Read, 2, 30, 40, OK, func(o *Op) { o.Leader, o.Offset, o.End, o.OutOfRange = false, 0, 0, true }),
			),
		},
		{
			name: "stale read: out of range after the append was acknowledged",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 0),
				readOp(2, 20, 30, 0, "", 0),
			),
			want: []string{"t/0: not linearizable", "cannot follow: #1 c2 read@n1 t/0@0 -> out of range"},
		},
		{
			name: "a read of a value from another offset",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 0),
				appendOp(1, 11, 20, OK, "b", 1),
				readOp(2, 30, 40, 0, "b", 2),
			),
			want: []string{"t/0: not linearizable", `read@n1 t/0@0 -> "b"`, `(the log holds "a" there)`},
		},
		{
			name: "two acknowledged appends at one offset",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 0),
				appendOp(2, 0, 10, OK, "b", 0),
			),
			want: []string{"t/0: not linearizable"},
		},
		{
			name: "a failed append was read",
			ops: numbered(
				appendOp(1, 0, 10, Failed, "a", 0),
				readOp(2, 20, 30, 0, "a", 1),
			),
			want: []string{"t/0: not linearizable"},
		},
		{
			name: "offsets out of order with real time",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 1),
				appendOp(2, 20, 30, OK, "b", 0),
			),
			want: []string{"t/0: not linearizable"},
		},
		{
			name: "an unknown append the final scan does not hold never happened",
			ops: numbered(
				appendOp(1, 0, 10, Unknown, "a", 0),
				appendOp(2, 20, 30, OK, "b", 1),
				op(Scan, 0, 40, 50, OK, func(o *Op) { o.Records = []Record{{Offset: 0, Value: "x"}, {Offset: 1, Value: "b"}} }),
			),
			want: []string{"t/0: not linearizable"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantVerdict(t, checkLinearizable(tc.ops, Options{}, false), tc.want...)
		})
	}
}

// TestLinearizableAnchored: the check against the final scan.
func TestLinearizableAnchored(t *testing.T) {
	scan := func(values ...string) Op {
		o := scanOp("n1", 0, values...)
		o.Call, o.Return = 100, 110
		return o
	}
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
		// scanOnly: a contradiction with the final log only, which
		// porcupine alone does not see (CheckFinalReads does).
		scanOnly bool
	}{
		{
			name: "concurrent appends, reads, an unknown append and a keyed retry",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 1),
				appendOp(2, 0, 10, OK, "b", 0),
				readOp(3, 5, 8, 1, "a", 2),
				readOp(4, 0, 3, 0, "", 0),
				appendOp(5, 11, 12, Unknown, "c", 0),
				readOp(3, 20, 30, 2, "c", 3),
				keyedAppend(6, 31, 32, Unknown, "k", "d", 0),
				keyedAppend(6, 33, 40, OK, "k", "d", 3),
				appendOp(7, 40, 50, Unknown, "never", 0),
				scan("b", "a", "c", "d"),
			),
		},
		{
			name: "stale read: out of range after the append was acknowledged",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 0),
				readOp(2, 20, 30, 0, "", 0),
				scan("a"),
			),
			want: []string{`t/0: offset 0 ("a") was written by 10, as #0 c1 append@n1 t/0 "a" -> 0 [0, 10] shows, but offset 0 could not be written before 20, as #1 c2 read@n1 t/0@0 -> out of range (end 0) [20, 30] (offset 0 out of range when it began) shows`},
		},
		{
			name: "offsets out of order with real time",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 1),
				appendOp(2, 20, 30, OK, "b", 0),
				scan("b", "a"),
			),
			want: []string{`t/0: offset 1 ("a") was written by 10`, `but offset 0 could not be written before 20, as #1 c2 append@n1 t/0 "b" -> 0 [20, 30] (its append began then) shows`},
		},
		{
			name: "a read disagrees with the final log",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 0),
				readOp(2, 20, 30, 0, "x", 1),
				scan("a"),
			),
			want: []string{`t/0: #1 c2 read@n1 t/0@0 -> "x" (end 1) [20, 30], but the final log holds "a" there`},
		},
		{
			name: "an acknowledged append disagrees with the final log",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 0),
				appendOp(1, 11, 20, OK, "b", 1),
				scan("b", "a"),
			),
			want:     []string{`acknowledged offset 0, but the final log holds "b" there`},
			scanOnly: true,
		},
		{
			name: "the final log holds a failed append",
			ops: numbered(
				appendOp(1, 0, 10, Failed, "a", 0),
				scan("a"),
			),
			want:     []string{`t/0: the final log holds "a" at 0, which no call that may have taken effect appended`},
			scanOnly: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantVerdict(t, CheckLinearizable(tc.ops, Options{}), tc.want...)
			if len(tc.want) == 0 || tc.scanOnly {
				wantVerdict(t, checkLinearizable(tc.ops, Options{}, false))
			} else if v := checkLinearizable(tc.ops, Options{}, false); v.OK() {
				t.Fatalf("porcupine alone finds it linearizable:\n%s", v.String())
			}
		})
	}
}

func TestLinearizableVisualization(t *testing.T) {
	dir := t.TempDir()
	ops := numbered(appendOp(1, 0, 10, OK, "a", 0), readOp(2, 20, 30, 0, "", 0))
	v := checkLinearizable(ops, Options{VisualizeDir: dir}, false)
	path := filepath.Join(dir, "linearizable-t-0.html")
	wantVerdict(t, v, "see "+path)
	if b, err := os.ReadFile(path); err != nil || len(b) == 0 {
		t.Fatalf("visualization: %d bytes, %v", len(b), err)
	}
}

// TestLinearizableRandom checks random histories of a correct log
// (seeded, so a failure replays): each passes, and each of a set of
// mutations that break linearizability makes it fail. LOGD_FAULT_LONG=1
// runs ten times as many seeds.
func TestLinearizableRandom(t *testing.T) {
	long := os.Getenv("LOGD_FAULT_LONG") == "1"
	cfgs := []struct {
		genConfig
		seeds, longSeeds int
	}{
		{genConfig{clients: 3, calls: 20, partitions: 1, read: 0.4, failed: 0.05, unknown: 0.1}, 20, 200},
		{genConfig{clients: 5, calls: 40, partitions: 2, read: 0.5, keyed: 0.3, failed: 0.1, unknown: 0.1, scan: true}, 20, 200},
		{genConfig{clients: 8, calls: 60, partitions: 3, read: 0.5, keyed: 0.2, failed: 0.05, unknown: 0.05, scan: true}, 10, 100},
		// Without a final scan, unknown appends nobody saw keep their
		// offsets open: refuting a mutated history searches longer.
		{genConfig{clients: 4, calls: 30, partitions: 1, read: 0.3, keyed: 0.5, unknown: 0.1}, 4, 40},
	}
	mutations := []struct {
		name   string
		mutate func(rng *rand.Rand, ops []Op) bool // false: not applicable
	}{
		{"read of another offset's value", mutateReadValue},
		{"stale out-of-range read", mutateStaleRead},
		{"two appends at one offset", mutateSameOffset},
		{"a failed append was read", mutateFailedRead},
	}
	applied := make([]int, len(mutations))
	total := 0
	for ci, cfg := range cfgs {
		seeds := cfg.seeds
		if long {
			seeds = cfg.longSeeds
		}
		total += seeds
		for seed := range seeds {
			rng := rand.New(rand.NewPCG(uint64(ci), uint64(seed)))
			ops := genLog(rng, cfg.genConfig)
			modes := []bool{false} // porcupine alone
			if cfg.scan {
				modes = append(modes, true)
			}
			for _, anchor := range modes {
				if v := checkLinearizable(ops, Options{}, anchor); !v.OK() || len(v.Inconclusive) > 0 {
					t.Fatalf("config %d seed %d anchored %v: a valid history fails:\n%s", ci, seed, anchor, v.String())
				}
			}
			for mi, m := range mutations {
				bad := append([]Op(nil), ops...)
				if !m.mutate(rng, bad) {
					continue
				}
				applied[mi]++
				for _, anchor := range modes {
					if v := checkLinearizable(bad, Options{}, anchor); v.OK() {
						t.Fatalf("config %d seed %d anchored %v: mutation %q passes:\n%s", ci, seed, anchor, m.name, v.String())
					}
				}
			}
		}
	}
	for mi, m := range mutations {
		if applied[mi] < total/2 {
			t.Errorf("mutation %q applied only %d times", m.name, applied[mi])
		}
	}
}

// pick returns the index of a random call satisfying ok, or -1.
func pick(rng *rand.Rand, ops []Op, ok func(*Op) bool) int {
	var idx []int
	for i := range ops {
		if ok(&ops[i]) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	return idx[rng.IntN(len(idx))]
}

func okRead(o *Op) bool   { return o.Kind == Read && o.Outcome == OK && !o.OutOfRange }
func okAppend(o *Op) bool { return o.Kind == Append && o.Outcome == OK && o.Key == "" }

func mutateReadValue(rng *rand.Rand, ops []Op) bool {
	r := pick(rng, ops, okRead)
	if r < 0 {
		return false
	}
	a := pick(rng, ops, func(o *Op) bool {
		return okAppend(o) && o.Partition == ops[r].Partition && o.Offset != ops[r].Offset
	})
	if a < 0 {
		return false
	}
	ops[r].Value = ops[a].Value
	return true
}

func mutateStaleRead(rng *rand.Rand, ops []Op) bool {
	r := pick(rng, ops, func(rd *Op) bool {
		if !okRead(rd) {
			return false
		}
		for i := range ops {
			a := &ops[i]
			if a.Kind == Append && a.Outcome == OK && a.Partition == rd.Partition && a.Offset >= rd.Offset && a.Return < rd.Call {
				return true
			}
		}
		return false
	})
	if r < 0 {
		return false
	}
	ops[r].OutOfRange, ops[r].Value = true, ""
	return true
}

func mutateSameOffset(rng *rand.Rand, ops []Op) bool {
	a := pick(rng, ops, okAppend)
	if a < 0 {
		return false
	}
	b := pick(rng, ops, func(o *Op) bool {
		return o.Kind == Append && o.Outcome == OK && o.Partition == ops[a].Partition && o.Offset != ops[a].Offset
	})
	if b < 0 {
		return false
	}
	ops[a].Offset = ops[b].Offset
	return true
}

func mutateFailedRead(rng *rand.Rand, ops []Op) bool {
	r := pick(rng, ops, func(rd *Op) bool {
		if !okRead(rd) {
			return false
		}
		for i := range ops {
			if okAppend(&ops[i]) && ops[i].Value == rd.Value {
				return true
			}
		}
		return false
	})
	if r < 0 {
		return false
	}
	for i := range ops {
		if okAppend(&ops[i]) && ops[i].Value == ops[r].Value {
			ops[i].Outcome = Failed
		}
	}
	return true
}

func TestLogStateAt(t *testing.T) {
	var s *logState
	for i := range 3000 {
		s = s.push(strconv.Itoa(i), false)
	}
	for o := range int64(3000) {
		if got := s.at(o).val; got != strconv.FormatInt(o, 10) {
			t.Fatalf("at(%d) = %q", o, got)
		}
	}
	steps := 0
	for e := s; e.n-1 > 7; steps++ {
		if e.jump != nil && e.jump.n-1 >= 7 {
			e = e.jump
		} else {
			e = e.prev
		}
	}
	if steps > 64 {
		t.Fatalf("at(7) of 3000 took %d steps", steps)
	}
}
