package histcheck

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
)

// genConfig shapes a random valid history of appends and leader reads.
type genConfig struct {
	clients, calls int // calls per client
	partitions     int32
	// Fractions of calls: reads, keyed appends; of all calls, failed and
	// unknown outcomes.
	read, keyed, failed, unknown float64
	// scan adds a final scan of every partition.
	scan bool
}

// genLog simulates clients calling a correct, linearizable log: each call
// takes effect at one instant (a real log's behaviour) between its call
// and return, or later for unknown outcomes; failed calls and half the
// unknown ones never take effect.
func genLog(rng *rand.Rand, cfg genConfig) []Op {
	type planned struct {
		op    Op
		at    int64 // when it takes effect
		apply bool
	}
	var plan []*planned
	for c := range cfg.clients {
		t := rng.Int64N(10)
		var retry *Op // an unknown keyed append to retry
		for i := range cfg.calls {
			p := &planned{apply: true}
			op := &p.op
			op.Client, op.Node, op.Leader, op.Topic = c, "n1", true, "t"
			op.Partition = rng.Int32N(cfg.partitions)
			switch {
			case retry != nil:
				op.Kind, op.Partition, op.Key, op.Value = Append, retry.Partition, retry.Key, retry.Value
				retry = nil
			case rng.Float64() < cfg.read:
				op.Kind = Read
			default:
				op.Kind, op.Value = Append, fmt.Sprintf("c%d-%d", c, i)
				if rng.Float64() < cfg.keyed {
					op.Key = "k-" + op.Value
				}
			}
			op.Call = t
			p.at = t + 1 + rng.Int64N(20)
			op.Return = p.at + 1 + rng.Int64N(20)
			switch r := rng.Float64(); {
			case r < cfg.failed:
				op.Outcome, p.apply = Failed, false
			case r < cfg.failed+cfg.unknown:
				op.Outcome = Unknown
				p.apply = op.Kind == Append && rng.IntN(2) == 0
				p.at = t + 1 + rng.Int64N(80) // may land after the client gave up
				if op.Key != "" {
					retry = op
				}
			default:
				op.Outcome = OK
			}
			t = op.Return + rng.Int64N(5)
			plan = append(plan, p)
		}
	}
	slices.SortStableFunc(plan, func(a, b *planned) int { return cmp.Compare(a.at, b.at) })
	logs := map[int32][]string{}
	keys := map[string]int64{}
	for _, p := range plan {
		op := &p.op
		if !p.apply && op.Outcome != OK {
			continue
		}
		l := logs[op.Partition]
		switch op.Kind {
		case Append:
			if o, dup := keys[op.Key]; dup && op.Key != "" {
				op.Offset, op.Duplicate = o, true
				continue
			}
			op.Offset = int64(len(l))
			if op.Key != "" {
				keys[op.Key] = op.Offset
			}
			logs[op.Partition] = append(l, op.Value)
		case Read:
			op.Offset = rng.Int64N(int64(len(l)) + 2)
			op.End = int64(len(l))
			if op.Offset >= op.End {
				op.OutOfRange = true
			} else {
				op.Value = l[op.Offset]
			}
		}
	}
	slices.SortStableFunc(plan, func(a, b *planned) int { return cmp.Compare(a.op.Call, b.op.Call) })
	var ops []Op
	var end int64
	for _, p := range plan {
		p.op.ID = len(ops)
		ops = append(ops, p.op)
		end = max(end, p.op.Return, p.at)
	}
	if cfg.scan {
		for part := range cfg.partitions {
			sc := Op{ID: len(ops), Kind: Scan, Node: "n1", Call: end + 1, Return: end + 2, Outcome: OK, Topic: "t", Partition: part}
			for o, val := range logs[part] {
				sc.Records = append(sc.Records, Record{Offset: int64(o), Value: val})
			}
			ops = append(ops, sc)
		}
	}
	return ops
}
