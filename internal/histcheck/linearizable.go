package histcheck

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// This file checks that each partition's log, as seen by leader calls, is
// linearizable: porcupine searches for an order of the calls, each placed
// between its call and return, in which a sequential log explains every
// answer. The model is one partition's log:
//
//   - append(v) returns the log's end offset and appends v; with an
//     idempotency key it may instead return an earlier offset holding v
//     (the answer to a retry), changing nothing;
//   - read(o) returns the value at o, or out-of-range when o >= end.
//
// Calls with an unknown outcome may take effect at any time after they
// began, so their return is placed after every other call. An unknown
// append whose value a final scan of the partition shows at offset o is
// known to have happened there; one whose value no scan shows never did
// and is left out. Without a scan an unknown append's offset stays open,
// which makes the search slower.

// logState is a persistent (shared, never changed) partition log: the last
// value and the log before it. nil is the empty log. jump points further
// back, in Myers' skew-binary pattern, so that reaching any offset takes
// O(log n) steps.
type logState struct {
	prev  *logState
	jump  *logState
	val   string
	anon  bool   // a placeholder: an unseen append of unknown outcome
	n     int64  // the log's length, this value included
	anons int    // placeholders in the log, this one included
	hash  uint64 // of the whole log
}

func (s *logState) len() int64 {
	if s == nil {
		return 0
	}
	return s.n
}

func (s *logState) anonCount() int {
	if s == nil {
		return 0
	}
	return s.anons
}

func (s *logState) hashOf() uint64 {
	if s == nil {
		return 0
	}
	return s.hash
}

// push returns the log with v (or a placeholder) appended.
func (s *logState) push(v string, anon bool) *logState {
	h, anons := strHash(v), s.anonCount()
	if anon {
		h, anons = 0x9e3779b97f4a7c15, anons+1
	}
	e := &logState{prev: s, jump: s, val: v, anon: anon, n: s.len() + 1, anons: anons, hash: s.hashOf()*1099511628211 ^ h}
	if s != nil && s.jump != nil && s.jump.jump != nil && s.n-s.jump.n == s.jump.n-s.jump.jump.n {
		e.jump = s.jump.jump
	}
	return e
}

// at returns the entry at offset o < len.
func (s *logState) at(o int64) *logState {
	for s.n-1 > o {
		if s.jump != nil && s.jump.n-1 >= o {
			s = s.jump
		} else {
			s = s.prev
		}
	}
	return s
}

// holds reports whether offset o holds the seen value v.
func (s *logState) holds(o int64, v string) bool {
	if o < 0 || o >= s.len() {
		return false
	}
	e := s.at(o)
	return !e.anon && e.val == v
}

// strHash is FNV-1a.
func strHash(v string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	return h
}

func logEqual(a, b *logState) bool {
	if a.len() != b.len() || a.hashOf() != b.hashOf() {
		return false
	}
	for a != b {
		if a.val != b.val || a.anon != b.anon {
			return false
		}
		a, b = a.prev, b.prev
	}
	return true
}

// logInput is a call's input to the model.
type logInput struct {
	read  bool
	value string // append
	keyed bool   // append with an idempotency key
	// anonymous: an append of unknown outcome whose value nobody saw; it
	// appends a placeholder. Placeholders are alike, so any order of them
	// can be had in call order: the anonymous append numbered anon (in
	// call order) may go only after the anon before it, which spares the
	// search every other order.
	anonymous bool
	anon      int
	// mustWrite: the merged open attempts of one key, one of which wrote.
	mustWrite bool
	offset    int64 // read
}

// logOutput is a call's answer.
type logOutput struct {
	open       bool   // an anonymous append: its offset is not known
	offset     int64  // append
	value      string // read
	outOfRange bool   // read
}

func logStep(state, input, output any) (bool, any) {
	s := state.(*logState)
	in, out := input.(logInput), output.(logOutput)
	if in.read {
		if out.outOfRange {
			return in.offset >= s.len(), s
		}
		return s.holds(in.offset, out.value), s
	}
	switch {
	case in.anonymous:
		return s.anonCount() == in.anon, s.push("", true)
	case out.offset == s.len():
		return true, s.push(in.value, false)
	case in.keyed && !in.mustWrite:
		return s.holds(out.offset, in.value), s
	}
	return false, s
}

func describeLogOp(input, output any) string {
	in, out := input.(logInput), output.(logOutput)
	if in.read {
		if out.outOfRange {
			return fmt.Sprintf("read(%d) -> out of range", in.offset)
		}
		return fmt.Sprintf("read(%d) -> %q", in.offset, out.value)
	}
	if in.anonymous {
		return "append(unseen) -> ?"
	}
	k := ""
	if in.keyed {
		k = ", keyed"
	}
	if out.open {
		return fmt.Sprintf("append(%q%s) -> ?", in.value, k)
	}
	return fmt.Sprintf("append(%q%s) -> %d", in.value, k, out.offset)
}

// describeLog shows a log's length and its last few values.
func describeLog(s *logState) string {
	var last []string
	for p := s; p != nil && len(last) < 5; p = p.prev {
		if p.anon {
			last = append(last, fmt.Sprintf("%d=(unseen)", p.n-1))
		} else {
			last = append(last, fmt.Sprintf("%d=%q", p.n-1, p.val))
		}
	}
	slices.Reverse(last)
	if s.len() > 5 {
		return fmt.Sprintf("end %d: ... %s", s.len(), strings.Join(last, " "))
	}
	return fmt.Sprintf("end %d: %s", s.len(), strings.Join(last, " "))
}

// logModel is porcupine's model of one partition's log.
func logModel() porcupine.Model {
	return porcupine.Model{
		Init:              func() any { return (*logState)(nil) },
		Step:              logStep,
		Equal:             func(a, b any) bool { return logEqual(a.(*logState), b.(*logState)) },
		Hash:              func(s any) uint64 { return s.(*logState).hashOf() },
		DescribeOperation: describeLogOp,
		DescribeState:     func(s any) string { return describeLog(s.(*logState)) },
		DescribeOperationMetadata: func(info any) string {
			if op, ok := info.(*Op); ok {
				return op.String()
			}
			return ""
		},
	}
}

// partitionKey orders partitions for stable output.
type partitionKey struct {
	topic     string
	partition int32
}

func (k partitionKey) String() string { return fmt.Sprintf("%s/%d", k.topic, k.partition) }

func comparePartitions(a, b partitionKey) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
}

// observedOffsets maps, per partition, each value that a final scan, an
// ok read or an ok append (a keyed retry's answer) shows to its offset. A value shown at two offsets is left out
// (the final-read and follower-read checkers report it). scanned marks
// the partitions with a final scan.
func observedOffsets(ops []Op) (seen map[partitionKey]map[string]int64, scanned map[partitionKey]bool) {
	seen, scanned = map[partitionKey]map[string]int64{}, map[partitionKey]bool{}
	conflict := map[partitionKey]map[string]bool{}
	note := func(k partitionKey, val string, o int64) {
		if seen[k] == nil {
			seen[k], conflict[k] = map[string]int64{}, map[string]bool{}
		}
		if prev, ok := seen[k][val]; ok && prev != o {
			conflict[k][val] = true
		}
		seen[k][val] = o
	}
	for i := range ops {
		op := &ops[i]
		if op.Outcome != OK {
			continue
		}
		k := partitionKey{op.Topic, op.Partition}
		switch {
		case op.Kind == Scan:
			scanned[k] = true
			for _, r := range op.Records {
				note(k, r.Value, r.Offset)
			}
		case op.Kind == Read && !op.OutOfRange, op.Kind == Append:
			note(k, op.Value, op.Offset)
		}
	}
	for k, vs := range conflict {
		for val := range vs {
			delete(seen[k], val)
		}
	}
	return seen, scanned
}

// CheckLinearizable checks each partition's log, from appends (on any
// node: followers forward them) and leader reads. The final scans are
// used to settle unknown outcomes; only the anchored check below also
// requires the answers to agree with them (porcupine leaves that to
// CheckFinalReads). Where the final scans
// of a partition agree, it first checks the history against them
// (anchored.go), which is fast and names the calls at fault; then, if
// that found nothing, and for partitions without a usable scan, it runs
// porcupine. A partition whose porcupine search runs out of time is
// Inconclusive. When opt.VisualizeDir is set, each partition porcupine
// finds not linearizable gets its HTML visualization there.
func CheckLinearizable(ops []Op, opt Options) Verdict {
	return checkLinearizable(ops, opt, true)
}

// checkLinearizable is CheckLinearizable; anchor false skips the check
// against the final scans (so tests can exercise porcupine alone).
func checkLinearizable(ops []Op, opt Options, anchor bool) Verdict {
	v := Verdict{Checker: "linearizable"}
	mx := opt.maxViolations()
	seen, scanned := observedOffsets(ops)
	byPart := map[partitionKey][]*Op{}
	scans := map[partitionKey][]*Op{}
	appended := map[string]bool{} // topics the history appends to
	for i := range ops {
		op := &ops[i]
		if op.Kind == Append {
			appended[op.Topic] = true
		}
		if op.Outcome == Failed {
			continue
		}
		k := partitionKey{op.Topic, op.Partition}
		switch {
		case op.Kind == Append:
		case op.Kind == Read && op.Leader && op.Outcome == OK:
		case op.Kind == Scan && op.Outcome == OK:
			scans[k] = append(scans[k], op)
			continue
		default:
			continue
		}
		byPart[k] = append(byPart[k], op)
	}
	for k := range scans {
		if _, ok := byPart[k]; !ok && appended[k.topic] {
			byPart[k] = nil // a scanned partition no call reached: its records must be none
		}
	}
	keys := make([]partitionKey, 0, len(byPart))
	for k := range byPart {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, comparePartitions)
	calls, anchored := 0, 0
	for _, k := range keys {
		if log, ok := anchorScan(scans[k]); ok && anchor {
			anchored++
			before := len(v.Violations) + v.More
			checkAnchored(k, byPart[k], log, &v, mx)
			if len(v.Violations)+v.More > before {
				calls += len(byPart[k])
				continue
			}
		}
		hist := porcupineHistory(byPart[k], seen[k], scanned[k])
		calls += len(hist)
		res := porcupine.CheckOperationsTimeout(logModel(), hist, opt.timeout())
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			v.Inconclusive = append(v.Inconclusive, fmt.Sprintf("%s: porcupine found no verdict within %v (%d calls)", k, opt.timeout(), len(hist)))
			continue
		}
		v.add(mx, "%s", explainIllegal(k, hist, opt))
	}
	v.Checked = calls
	v.Note = fmt.Sprintf("calls in %d partitions, %d with a final scan", len(keys), anchored)
	return v
}

// porcupineHistory turns one partition's calls into porcupine operations.
// An open call returns after every other call, in a client lane of its
// own so the visualization shows it. An open append takes effect at most
// once, so:
//
//   - one whose value a scan, a read or an ok append shows gets that
//     offset; one that no final scan holds is left out; one nobody saw
//     stays open and anonymous (its value cannot matter to any answer,
//     only the offset it takes does);
//   - the open attempts of one idempotency key, when the key's attempts
//     were made one at a time, become one call: those that began after
//     an ok attempt returned are left out (the key was written before
//     they began, so they changed nothing), and the others merge into
//     one append that began with the first of them and must write (if an
//     ok attempt wrote instead, the merged call can take its place at the
//     same instant, since it began earlier). Without this, each attempt
//     could be a no-op anywhere after the key was written, and the search
//     would try every such placement.
func porcupineHistory(ops []*Op, seen map[string]int64, scanned bool) []porcupine.Operation {
	var last int64
	lanes := map[int]int{}
	byKey := map[string][]*Op{}
	for _, op := range ops {
		if !op.open() {
			last = max(last, op.Return)
		}
		last = max(last, op.Call)
		if _, ok := lanes[op.Client]; !ok {
			lanes[op.Client] = len(lanes)
		}
		if op.Kind == Append && op.Key != "" {
			byKey[op.Key] = append(byKey[op.Key], op)
		}
	}
	// merged maps an open keyed attempt to the call it merges into (nil:
	// left out); attempts of keys not made one at a time are absent.
	merged := map[*Op]*Op{}
	for _, attempts := range byKey {
		if !oneAtATime(attempts) {
			continue
		}
		var firstOK *Op
		for _, a := range attempts {
			if a.Outcome == OK && (firstOK == nil || a.Call < firstOK.Call) {
				firstOK = a
			}
		}
		var into *Op
		for _, a := range attempts { // in call order
			if !a.open() {
				continue
			}
			if firstOK != nil && a.Call > firstOK.Return {
				merged[a] = nil
				continue
			}
			if into == nil {
				into = a
			}
			merged[a] = into
		}
	}

	// longer holds (pos, ret): an ok call shows the log longer than pos
	// by ret (an append at pos, a read of a value at pos). An open append
	// that took offset o took effect before the log grew past o, so by
	// the earliest ret of any pos >= o: bounding its return there keeps
	// every linearization and spares the search from trying it anywhere
	// later.
	type growth struct{ pos, ret int64 }
	var longer []growth
	for _, op := range ops {
		if op.Outcome == OK && (op.Kind == Append || !op.OutOfRange) {
			longer = append(longer, growth{op.Offset, op.Return})
		}
	}
	slices.SortFunc(longer, func(a, b growth) int { return cmp.Compare(b.pos, a.pos) })
	for i := 1; i < len(longer); i++ {
		longer[i].ret = min(longer[i].ret, longer[i-1].ret)
	}
	grownPast := func(o int64) int64 { // the earliest return showing the log past o
		k := sort.Search(len(longer), func(i int) bool { return longer[i].pos < o })
		if k == 0 {
			return Infinity
		}
		return longer[k-1].ret // the least ret of every pos >= o
	}

	nextLane := len(lanes)
	hist := make([]porcupine.Operation, 0, len(ops))
	var anons []int // indexes in hist
	for _, op := range ops {
		in := logInput{read: op.Kind == Read, value: op.Value, keyed: op.Key != "", offset: op.Offset}
		out := logOutput{offset: op.Offset, value: op.Value, outOfRange: op.OutOfRange}
		call, ret, lane := op.Call, op.Return, lanes[op.Client]
		if op.open() {
			into, isMerged := merged[op]
			if isMerged && into != op {
				continue // left out, or merged into an earlier attempt
			}
			in.mustWrite = isMerged
			ret, lane = last+1, nextLane
			nextLane++
			o, ok := seen[op.Value]
			switch {
			case ok:
				out.offset = o
				ret = max(min(ret, grownPast(o)), call)
			case scanned:
				continue // the final scans show it never happened
			default:
				in.value, in.keyed, in.anonymous, out.open = "", false, true, true
				anons = append(anons, len(hist))
			}
		}
		hist = append(hist, porcupine.Operation{ClientId: lane, Input: in, Output: out, Call: call, Return: ret, Metadata: op})
	}
	slices.SortStableFunc(anons, func(a, b int) int { return cmp.Compare(hist[a].Call, hist[b].Call) })
	for n, i := range anons {
		in := hist[i].Input.(logInput)
		in.anon = n
		hist[i].Input = in
	}
	return hist
}

// oneAtATime sorts the attempts of one key by call and reports whether
// each began after the one before it ended (a pending attempt never
// ended).
func oneAtATime(attempts []*Op) bool {
	slices.SortFunc(attempts, func(a, b *Op) int { return cmp.Compare(a.Call, b.Call) })
	for i := 1; i < len(attempts); i++ {
		prev := attempts[i-1]
		if prev.Outcome == Pending || attempts[i].Call < prev.Return {
			return false
		}
	}
	return true
}

// explainIllegal describes why a partition is not linearizable: the
// longest order porcupine found, the log it leads to, and the first call
// left out of it (by return time: the one that had to come next). It
// writes the visualization if asked.
func explainIllegal(k partitionKey, hist []porcupine.Operation, opt Options) string {
	_, info := porcupine.CheckOperationsVerbose(logModel(), hist, opt.timeout())
	var b strings.Builder
	fmt.Fprintf(&b, "%s: not linearizable (%d calls)", k, len(hist))
	if opt.VisualizeDir != "" {
		path := filepath.Join(opt.VisualizeDir, fmt.Sprintf("linearizable-%s-%d.html", safeName(k.topic), k.partition))
		if err := os.MkdirAll(opt.VisualizeDir, 0o755); err != nil {
			fmt.Fprintf(&b, "; visualization not written: %v", err)
		} else if err := porcupine.VisualizePath(logModel(), info, path); err != nil {
			fmt.Fprintf(&b, "; visualization not written: %v", err)
		} else {
			fmt.Fprintf(&b, "; see %s", path)
		}
	}
	partials := info.PartialLinearizationsOperations()
	if len(partials) == 0 || len(partials[0]) == 0 {
		return b.String()
	}
	longest := slices.MaxFunc(partials[0], func(a, b []porcupine.Operation) int { return cmp.Compare(len(a), len(b)) })
	var s *logState
	done := map[*Op]bool{}
	for _, o := range longest {
		_, next := logStep(s, o.Input, o.Output)
		s = next.(*logState)
		done[o.Metadata.(*Op)] = true
	}
	fmt.Fprintf(&b, "\n    longest legal order: %d calls, leading to log %s", len(longest), describeLog(s))
	// The stuck calls: not in the order, by return time.
	var rest []porcupine.Operation
	for _, o := range hist {
		if !done[o.Metadata.(*Op)] {
			rest = append(rest, o)
		}
	}
	slices.SortFunc(rest, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
	if len(rest) == 0 {
		return b.String()
	}
	o := rest[0]
	fmt.Fprintf(&b, "\n    cannot follow: %s", o.Metadata.(*Op))
	if in := o.Input.(logInput); in.read && in.offset < s.len() && in.offset >= 0 {
		if e := s.at(in.offset); e.anon {
			fmt.Fprintf(&b, " (the log holds an unseen append there)")
		} else {
			fmt.Fprintf(&b, " (the log holds %q there)", e.val)
		}
	}
	if len(rest) > 1 {
		fmt.Fprintf(&b, "\n    and %d more calls left unordered after it", len(rest)-1)
	}
	return b.String()
}

// safeName keeps a topic name usable in a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
}
