package queue

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/* expectations with the actual output")

// fakeSource is an in-memory RecordSource: records by partition and offset.
type fakeSource struct {
	recs map[int32]map[int64]RecordInfo
	ends []int64
}

func (s *fakeSource) RecordInfo(p int32, off int64) (RecordInfo, error) {
	return s.recs[p][off], nil
}

// queueScript runs one testdata script: commands, each followed by "----"
// and the expected output up to a blank line (like etcd-io/raft's
// interaction tests). Times are durations since the epoch ("5s"); tokens
// are named T1, T2, ... in the order they are issued.
type queueScript struct {
	t      *testing.T
	q      *Group
	src    *fakeSource
	tokens map[string]Token
	names  map[Token]string
}

func TestQueueScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s := &queueScript{t: t, src: &fakeSource{recs: map[int32]map[int64]RecordInfo{}}, tokens: map[string]Token{}, names: map[Token]string{}}
			got := s.run(string(b))
			if *rewrite {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != string(b) {
				t.Errorf("script output differs (run with -rewrite to accept):\n%s", diffLines(string(b), got))
			}
		})
	}
}

// run executes the script and returns it with actual outputs in place.
func (s *queueScript) run(script string) string {
	var out strings.Builder
	lines := strings.Split(script, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") || i+1 >= len(lines) || lines[i+1] != "----" {
			if i == len(lines)-1 && line == "" {
				break
			}
			out.WriteString(line + "\n")
			continue
		}
		out.WriteString(line + "\n----\n")
		i += 2
		for i < len(lines) && lines[i] != "" {
			i++
		}
		res := s.exec(line)
		out.WriteString(res)
		if i < len(lines) {
			out.WriteString("\n")
		}
	}
	return out.String()
}

// args parses "cmd k=v k2=v2 word ..." into the command, its key=value
// arguments and its bare words.
func parseArgs(line string) (string, map[string]string, []string) {
	f := strings.Fields(line)
	kv := map[string]string{}
	var words []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			words = append(words, a)
		}
	}
	return f[0], kv, words
}

func (s *queueScript) dur(kv map[string]string, k string) time.Duration {
	v, ok := kv[k]
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		s.t.Fatalf("%s=%q: %v", k, v, err)
	}
	return d
}

func (s *queueScript) num(kv map[string]string, k string, def int) int {
	v, ok := kv[k]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		s.t.Fatalf("%s=%q: %v", k, v, err)
	}
	return n
}

func fmtTime(ns int64) string { return time.Duration(ns).String() }

func fmtAttempt(a Attempt) string {
	out := fmt.Sprintf("#%d claimed=%s worker=%q until=%s extends=%d ended=%s outcome=%s", a.Delivery, fmtTime(a.Claimed), a.Worker, fmtTime(a.LeaseUntil), a.Extends, fmtTime(a.Ended), a.Outcome)
	if a.Error != "" {
		e := a.Error
		if len(e) > 12 {
			e = fmt.Sprintf("%s...(%d bytes)", e[:12], len(e))
		}
		out += fmt.Sprintf(" error=%q", e)
	}
	if a.ErrorCut {
		out += " error-cut"
	}
	if a.ErrorDropped {
		out += " error-dropped"
	}
	return out
}

func (s *queueScript) exec(line string) string {
	cmd, kv, words := parseArgs(line)
	now := int64(s.dur(kv, "t"))
	var b strings.Builder
	switch cmd {
	case "group":
		parts := s.num(kv, "partitions", 1)
		cfg := Config{
			Lease: s.dur(kv, "lease"), MaxDeliveries: s.num(kv, "max-deliveries", 0),
			BackoffBase: s.dur(kv, "backoff-base"), BackoffMax: s.dur(kv, "backoff-max"),
			MaxInFlight: s.num(kv, "cap", 0), AgeLimit: s.dur(kv, "age-limit"),
		}
		starts := make([]int64, parts)
		for i := range starts {
			starts[i] = int64(s.num(kv, "start", 0))
		}
		q, err := New("jobs", "workers", cfg, starts, []byte("0123456789abcdef"), 1, now)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		s.q = q
		s.src.ends = make([]int64, parts)
		c := q.Config()
		fmt.Fprintf(&b, "lease=%v max-deliveries=%d backoff=%v..%v cap=%d age-limit=%v dlq=%s\n",
			c.Lease, c.MaxDeliveries, c.BackoffBase, c.BackoffMax, c.MaxInFlight, c.AgeLimit, c.DeadLetterTopic)
	case "records":
		// records p=0 n=3 ts=0s deadline=10s missing
		p := int32(s.num(kv, "p", 0))
		if s.src.recs[p] == nil {
			s.src.recs[p] = map[int64]RecordInfo{}
		}
		info := RecordInfo{Exists: true, Timestamp: int64(s.dur(kv, "ts")), Size: s.num(kv, "size", 10)}
		if _, ok := kv["deadline"]; ok {
			info.Deadline = int64(s.dur(kv, "deadline"))
		}
		for _, w := range words {
			switch w {
			case "missing":
				info.Exists = false
			case "bad-deadline":
				info.InvalidDeadline = true
			}
		}
		first := s.src.ends[p]
		n := s.num(kv, "n", 1)
		for range n {
			s.src.recs[p][s.src.ends[p]] = info
			s.src.ends[p]++
		}
		if s.q != nil && info.Exists {
			// As the state machine does for every append: the batch
			// (61 bytes of header) and the records' sizes.
			s.q.NoteAppend(Appended{Partition: p, Base: int64(first), Records: int64(n), BatchBytes: int64(61 + n*info.Size), RecordBytes: int64(n * info.Size), At: now})
		}
		fmt.Fprintf(&b, "p%d: offsets %d..%d\n", p, first, s.src.ends[p]-1)
	case "claim":
		res, err := s.q.Claim(ClaimRequest{Now: now, Index: uint64(100 + len(s.tokens)), Max: s.num(kv, "max", 1),
			MaxBytes: s.num(kv, "max-bytes", 0), Lease: s.dur(kv, "lease"), Ends: s.src.ends, Worker: kv["worker"]}, s.src)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		for _, d := range res.Deliveries {
			name := fmt.Sprintf("T%d", len(s.tokens)+1)
			s.tokens[name] = d.Token
			s.names[d.Token] = name
			fmt.Fprintf(&b, "%s: p%d@%d delivery=%d until=%s first=%s\n", name, d.Partition, d.Offset, d.Deliveries, fmtTime(d.LeaseUntil), fmtTime(d.FirstDelivered))
		}
		if len(res.AtCap) > 0 {
			fmt.Fprintf(&b, "at cap: %v\n", res.AtCap)
		}
		if len(res.Deliveries) == 0 && len(res.AtCap) == 0 {
			b.WriteString("nothing\n")
		}
	case "ack", "extend":
		var toks []Token
		for _, w := range words {
			toks = append(toks, s.token(w))
		}
		var rs []TokenResult
		if cmd == "ack" {
			rs = s.q.Ack(now, toks)
		} else {
			var err error
			if rs, err = s.q.Extend(now, toks, s.dur(kv, "lease")); err != nil {
				return fmt.Sprintf("error: %v\n", err)
			}
		}
		for i, r := range rs {
			s.printResult(&b, words[i], r)
		}
	case "nack":
		var ns []Nack
		for _, w := range words {
			if w == "permanent" {
				continue
			}
			n := Nack{Token: s.token(w), Error: kv["err"], Permanent: strings.Contains(line, " permanent")}
			if size := s.num(kv, "err-bytes", 0); size > 0 {
				n.Error = strings.Repeat("x", size)
			}
			if _, ok := kv["delay"]; ok {
				n.Delay, n.HasDelay = s.dur(kv, "delay"), true
			}
			ns = append(ns, n)
		}
		for i, r := range s.q.Nack(now, ns) {
			s.printResult(&b, s.names[ns[i].Token], r)
		}
	case "release":
		fmt.Fprintf(&b, "released %d\n", s.q.Release(now, kv["worker"], kv["err"]))
	case "deadletters":
		// Moves pending dead letters as the FSM would, at most limit.
		dls := s.q.PendingDeadLetters(s.num(kv, "limit", 0))
		for _, d := range dls {
			lastErr := d.LastError
			if len(lastErr) > 40 {
				lastErr = fmt.Sprintf("%s...(%d bytes)", lastErr[:12], len(lastErr))
			}
			fmt.Fprintf(&b, "p%d@%d reason=%s deliveries=%d first=%s last=%s error=%q\n", d.Partition, d.Offset, d.Reason, d.Deliveries, fmtTime(d.FirstDelivered), fmtTime(d.LastDelivered), lastErr)
			if d.HistoryDropped > 0 {
				fmt.Fprintf(&b, "  (%d older attempts dropped)\n", d.HistoryDropped)
			}
			for _, a := range d.History {
				b.WriteString("  " + fmtAttempt(a) + "\n")
			}
		}
		s.q.MarkDeadLettered(dls)
		if len(dls) == 0 {
			b.WriteString("none\n")
		}
	case "stats":
		for _, st := range s.q.Stats(now, s.src.ends) {
			fmt.Fprintf(&b, "p%d: start=%d next=%d end=%d ready=%d in-flight=%d delayed=%d dead-pending=%d acked=%d dead=%d at-cap=%v oldest-ready=%d\n",
				st.Partition, st.Start, st.Next, st.End, st.Ready, st.InFlight, st.Delayed, st.DeadPending, st.Acked, st.DeadLettered, st.AtCap, st.OldestReady)
		}
		ok, wake := s.q.Claimable(now, s.src.ends)
		if ok {
			b.WriteString("claimable now\n")
		} else if wake == 1<<63-1 {
			b.WriteString("claimable: never without new records\n")
		} else {
			fmt.Fprintf(&b, "claimable at %s\n", fmtTime(wake))
		}
	case "starts":
		// starts t=... p=0 offset=5: moves a partition's start.
		err := s.q.SetStarts(now, []PartitionStart{{Partition: int32(s.num(kv, "p", 0)), Offset: int64(s.num(kv, "offset", 0))}}, s.src, s.src.ends)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		b.WriteString("moved\n")
	case "exact":
		// The state machine reached the level of exact bytes.
		if err := s.q.SetExactBytes(s.src, s.src.ends, now); err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		b.WriteString("counting exact bytes\n")
	case "backlog":
		bl := s.q.Backlog(s.src.ends)
		fmt.Fprintf(&b, "records=%d bytes=%d exact=%v\n", bl.Records, bl.Bytes, s.q.ExactBytes())
	case "age":
		// age t=... bound=...: the oldest unfinished record's age and
		// whether a produce at t would pass the bound.
		at, ok := s.q.OldestAppend(s.src.ends)
		if !ok {
			b.WriteString("no unfinished record with a known append time\n")
			break
		}
		bound := int64(s.dur(kv, "bound"))
		age := now - at
		fmt.Fprintf(&b, "oldest appended at %s, age %s", fmtTime(at), fmtTime(age))
		if age > bound {
			fmt.Fprintf(&b, " > bound %s: refused, %d records to drain", fmtTime(bound), s.q.AppendedBefore(now-bound, s.src.ends))
		} else {
			fmt.Fprintf(&b, " <= bound %s: admitted", fmtTime(bound))
		}
		fmt.Fprintf(&b, " (marks %d)\n", len(s.q.parts[0].Appended))
	case "in-flight":
		recs, more := s.q.InFlight(now, s.num(kv, "limit", 0))
		for _, r := range recs {
			fmt.Fprintf(&b, "p%d@%d worker=%q delivery=%d delivered=%s until=%s extends=%d\n", r.Partition, r.Offset, r.Worker, r.Delivery, fmtTime(r.Delivered), fmtTime(r.LeaseUntil), r.Extends)
		}
		if more {
			b.WriteString("(more)\n")
		}
		if len(recs) == 0 {
			b.WriteString("none\n")
		}
	case "history":
		// history p=0 o=3: a tracked record's attempts so far.
		p := s.q.parts[s.num(kv, "p", 0)]
		r := p.find(int64(s.num(kv, "o", 0)))
		if r == nil {
			b.WriteString("not tracked\n")
			break
		}
		if r.HistoryDropped > 0 {
			fmt.Fprintf(&b, "(%d older attempts dropped)\n", r.HistoryDropped)
		}
		for _, a := range r.History {
			b.WriteString(fmtAttempt(a) + "\n")
		}
		fmt.Fprintf(&b, "group history text: %d bytes\n", s.q.historyBytes)
	case "history-budget":
		s.q.historyBudget = int64(s.num(kv, "bytes", 0))
		fmt.Fprintf(&b, "budget %d bytes\n", s.q.historyBudget)
	case "pause", "resume":
		fmt.Fprintf(&b, "changed=%v\n", s.q.SetPaused(cmd == "pause"))
	case "drain":
		r, by := s.q.DrainRate(now)
		fmt.Fprintf(&b, "records/s=%.3g bytes/s=%.3g retry-after(excess=%d)=%v\n", r, by, s.num(kv, "excess", 1), RetryAfter(float64(s.num(kv, "excess", 1)), r))
	case "tracked":
		// Internal view: memory held per partition.
		for i, p := range s.q.parts {
			fmt.Fprintf(&b, "p%d: tracked=%d live=%d recent=%d\n", i, len(p.Tracked), p.Live, len(p.Recent))
		}
	case "snapshot":
		// Round-trips the state through a snapshot.
		q, err := Restore(s.q.Snapshot())
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		s.q = q
		b.WriteString("restored\n")
	default:
		s.t.Fatalf("unknown command %q", cmd)
	}
	return b.String()
}

func (s *queueScript) token(name string) Token {
	t, ok := s.tokens[name]
	if ok {
		return t
	}
	// A token's text form stands for a token the group never issued.
	t, err := ParseToken(name)
	if err != nil {
		s.t.Fatalf("unknown token %s", name)
	}
	return t
}

func (s *queueScript) printResult(b *strings.Builder, name string, r TokenResult) {
	fmt.Fprintf(b, "%s: %s", name, r.Outcome)
	if r.Detail != "" {
		fmt.Fprintf(b, " (%s)", r.Detail)
	}
	if r.DeadLettered {
		b.WriteString(" dead-lettered")
	}
	if r.AvailableAt != 0 {
		fmt.Fprintf(b, " available-at=%s", fmtTime(r.AvailableAt))
	}
	if r.LeaseUntil != 0 {
		fmt.Fprintf(b, " until=%s", fmtTime(r.LeaseUntil))
	}
	b.WriteString("\n")
}

// diffLines shows the first differing lines of two texts.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := 0; i < max(len(w), len(g)) && len(out) < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			out = append(out, fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, wl, gl))
		}
	}
	return strings.Join(out, "\n")
}
