package histcheck

import (
	"cmp"
	"fmt"
	"slices"
)

// groupKey names one committed offset: a group's, for one partition.
type groupKey struct {
	group     string
	topic     string
	partition int32
}

func (k groupKey) String() string { return fmt.Sprintf("%s %s/%d", k.group, k.topic, k.partition) }

// CheckGroups checks consumer groups, whose committed offset only moves
// forward by commits (a lower commit leaves it unchanged) and back only by
// a reset:
//
//   - a leader fetch_committed never answers less than an offset that an
//     ok commit or an ok leader fetch established before the fetch began,
//     unless a reset (not failed) may have taken effect in between;
//   - a client fetching from one node (follower fetches, which may trail)
//     never sees the offset go back, unless a reset it had not yet seen
//     began before the later fetch ended;
//   - a commit from a fenced generation never succeeds: once a join
//     showed another member owning the partition at generation G, or a
//     reset returned generation G, a commit of that partition with a
//     generation below G must fail.
func CheckGroups(ops []Op, opt Options) Verdict {
	v := Verdict{Checker: "groups"}
	mx := opt.maxViolations()
	type byKey struct {
		floors  []*Op // ok commits and ok leader fetches
		fetches []*Op // ok fetches
		resets  []*Op // resets not failed
		commits []*Op // ok commits
		owners  []*Op // ok joins that assign the partition, ok resets with a generation
	}
	keys := map[groupKey]*byKey{}
	get := func(k groupKey) *byKey {
		if keys[k] == nil {
			keys[k] = &byKey{}
		}
		return keys[k]
	}
	for i := range ops {
		op := &ops[i]
		k := groupKey{op.Group, op.Topic, op.Partition}
		switch op.Kind {
		case Commit:
			if op.Outcome == OK {
				get(k).floors = append(get(k).floors, op)
				get(k).commits = append(get(k).commits, op)
				v.Checked++
			}
		case FetchCommitted:
			if op.Outcome == OK {
				if op.Leader {
					get(k).floors = append(get(k).floors, op)
				}
				get(k).fetches = append(get(k).fetches, op)
				v.Checked++
			}
		case Reset:
			if op.Outcome != Failed {
				get(k).resets = append(get(k).resets, op)
			}
			if op.Outcome == OK && op.Generation > 0 {
				get(k).owners = append(get(k).owners, op)
			}
		case Join:
			if op.Outcome != OK {
				continue
			}
			for _, tp := range op.Assigned {
				k := groupKey{op.Group, tp.Topic, tp.Partition}
				get(k).owners = append(get(k).owners, op)
			}
		}
	}
	sorted := make([]groupKey, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.SortFunc(sorted, func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})

	// resetBetween reports whether a reset may have taken effect after
	// something that happened no earlier than from, and before to.
	resetBetween := func(resets []*Op, from, to int64) bool {
		for _, r := range resets {
			if r.ret() > from && r.Call < to {
				return true
			}
		}
		return false
	}

	for _, k := range sorted {
		b := keys[k]
		for _, f := range b.fetches {
			if !f.Leader {
				continue
			}
			// The strongest witness: the latest-called event that
			// established more than f answered and ended before f began
			// (fewer resets can fall after it).
			var w *Op
			for _, e := range b.floors {
				if e != f && e.Return < f.Call && e.Offset > f.Offset && (w == nil || e.Call > w.Call) {
					w = e
				}
			}
			if w != nil && !resetBetween(b.resets, w.Call, f.Return) {
				v.add(mx, "went back: %s: committed %d, but %d was established before the read by %s; read %s", k, f.Offset, w.Offset, w, f)
			}
		}
		// Follower fetches, per client and node, in call order.
		type stream struct {
			client int
			node   string
		}
		streams := map[stream][]*Op{}
		var order []stream
		for _, f := range b.fetches {
			if f.Leader {
				continue
			}
			s := stream{f.Client, f.Node}
			if streams[s] == nil {
				order = append(order, s)
			}
			streams[s] = append(streams[s], f)
		}
		// A follower applies resets in log order, as late as it likes: a
		// step back is explained by the next reset this stream has not
		// yet been seen to pass, if that reset began before the read
		// ended.
		resets := slices.Clone(b.resets)
		slices.SortFunc(resets, func(a, b *Op) int { return cmp.Compare(a.Call, b.Call) })
		for _, s := range order {
			fs := streams[s]
			slices.SortFunc(fs, func(a, b *Op) int { return cmp.Compare(a.Call, b.Call) })
			var top *Op
			passed := 0 // resets this stream has passed
			for _, f := range fs {
				if top != nil && f.Offset < top.Offset {
					if passed < len(resets) && resets[passed].Call < f.Return {
						passed++
					} else {
						v.add(mx, "went back: %s: client %d on %s read committed %d after %d, with no reset between: %s after %s", k, s.client, s.node, f.Offset, top.Offset, f, top)
						continue
					}
				}
				top = f
			}
		}
		for _, c := range b.commits {
			for _, o := range b.owners {
				if o.Return < c.Call && o.Generation > c.Generation && (o.Kind == Reset || o.Member != c.Member) {
					v.add(mx, "fenced commit succeeded: %s: %s, after generation %d took the partition: %s", k, c, o.Generation, o)
					break
				}
			}
		}
	}
	v.Note = fmt.Sprintf("ok commits and fetches of %d group partitions", len(keys))
	return v
}
