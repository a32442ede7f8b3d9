package histcheck

import "fmt"

// This file checks a partition's history against its final scan. The
// scan is itself a read of every offset after every other call, so a
// linearizable history leads to exactly the log it shows. With the log's
// content known, a state is just the log's length, and linearizability
// comes down to times: the append that wrote offset o took effect at some
// time t(o), with t(0) <= t(1) <= ..., and
//
//   - t(o) no earlier than the call of an append of the value at o (the
//     first attempt's, for a key's retries);
//   - t(o) no later than the return of an ok append answering o, or of an
//     ok leader read that found the value at o;
//   - t(o) no earlier than the call of an ok leader read of o that found
//     it out of range;
//
// and every ok answer names the scan's value at its offset. Pushing each
// t(o) as early as its bounds allow decides this in one pass, and names
// the two calls that cannot both be right. Porcupine's search, which
// needs no scan, costs far more on a history that is not linearizable.

// bound is one end of an offset's window, with the call that set it.
type bound struct {
	t   int64
	why *Op
}

// anchorScan returns the partition's final log when every scan of it
// agrees (each a prefix of the longest), and whether it is usable: no
// value twice (the writer of each offset must be known).
func anchorScan(scans []*Op) ([]Record, bool) {
	var longest []Record
	for _, sc := range scans {
		if len(sc.Records) > len(longest) {
			longest = sc.Records
		}
	}
	if len(scans) == 0 {
		return nil, false
	}
	seen := make(map[string]bool, len(longest))
	for i, r := range longest {
		if r.Offset != int64(i) || seen[r.Value] {
			return nil, false
		}
		seen[r.Value] = true
	}
	for _, sc := range scans {
		for i, r := range sc.Records {
			if r != longest[i] {
				return nil, false
			}
		}
	}
	return longest, true
}

// checkAnchored checks one partition's appends and leader reads against
// its final log, adding a violation per contradiction found.
func checkAnchored(k partitionKey, ops []*Op, log []Record, v *Verdict, mx int) {
	n := int64(len(log))
	at := make(map[string]int64, n)
	for _, r := range log {
		at[r.Value] = r.Offset
	}
	writer := make([]bound, n) // the earliest call of an append of the value
	written := make([]bool, n)
	lo := make([]bound, n) // the latest call of a read that found it out of range
	hi := make([]bound, n) // the earliest return of a call that found it there
	for i := range hi {
		hi[i].t = Infinity
	}
	for _, op := range ops {
		switch {
		case op.Kind == Append:
			o, held := at[op.Value]
			if held && (!written[o] || op.Call < writer[o].t) {
				writer[o], written[o] = bound{op.Call, op}, true
			}
			if op.Outcome != OK {
				continue
			}
			switch {
			case op.Offset < 0 || op.Offset >= n:
				v.add(mx, "%s: %s acknowledged offset %d, but the final log ends at %d", k, op, op.Offset, n)
			case log[op.Offset].Value != op.Value:
				v.add(mx, "%s: %s acknowledged offset %d, but the final log holds %q there", k, op, op.Offset, log[op.Offset].Value)
			case op.Return < hi[op.Offset].t:
				hi[op.Offset] = bound{op.Return, op}
			}
		case op.OutOfRange:
			if op.Offset >= 0 && op.Offset < n && op.Call > lo[op.Offset].t {
				lo[op.Offset] = bound{op.Call, op}
			}
		default:
			switch {
			case op.Offset < 0 || op.Offset >= n:
				v.add(mx, "%s: %s read offset %d, but the final log ends at %d", k, op, op.Offset, n)
			case log[op.Offset].Value != op.Value:
				v.add(mx, "%s: %s, but the final log holds %q there", k, op, log[op.Offset].Value)
			case op.Return < hi[op.Offset].t:
				hi[op.Offset] = bound{op.Return, op}
			}
		}
	}
	for o := range lo {
		if writer[o].t > lo[o].t || lo[o].why == nil {
			lo[o] = writer[o]
		}
	}
	var cur bound // the earliest time offset o can be written
	curAt := int64(-1)
	for o := range n {
		if !written[o] {
			v.add(mx, "%s: the final log holds %q at %d, which no call that may have taken effect appended", k, log[o].Value, o)
			continue
		}
		if lo[o].t >= cur.t || cur.why == nil {
			cur, curAt = lo[o], o
		}
		if cur.t > hi[o].t {
			v.add(mx, "%s: offset %d (%q) was written by %d, as %s shows, but offset %d could not be written before %d, as %s shows",
				k, o, log[o].Value, hi[o].t, hi[o].why, curAt, cur.t, describeLower(cur.why, curAt))
			cur = hi[o] // go on from the latest time that fits this offset
			curAt = o
		}
	}
}

// describeLower says why an offset cannot have been written earlier.
func describeLower(op *Op, o int64) string {
	if op.Kind == Read {
		return fmt.Sprintf("%s (offset %d out of range when it began)", op, o)
	}
	return fmt.Sprintf("%s (its append began then)", op)
}
