package group

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// cgFakeTopics is a Topics of fixed topics with settable end offsets.
type cgFakeTopics struct {
	parts map[string]int32
	inc   map[string]uint64
	ends  map[TopicPartition]int64
}

func newCGFakeTopics() *cgFakeTopics {
	return &cgFakeTopics{
		parts: map[string]int32{"orders": 4, "audit": 1},
		inc:   map[string]uint64{"orders": 1, "audit": 2},
		ends:  map[TopicPartition]int64{},
	}
}

func (f *cgFakeTopics) Topic(name string) (int32, uint64, bool) {
	n, ok := f.parts[name]
	return n, f.inc[name], ok
}

func (f *cgFakeTopics) EndOffset(topic string, p int32) int64 {
	return f.ends[TopicPartition{topic, p}]
}

// cgClock is the injected clock of the scripts: command times in ns.
type cgClock struct{ now int64 }

func (c *cgClock) advance(d time.Duration) { c.now += int64(d) }

// cgStep is one line of a group script: an action at the clock's time and
// what must hold after it.
type cgStep struct {
	advance time.Duration
	do      func(g *ConsumerGroup, now int64, topics *cgFakeTopics) error
	wantErr error
	// owners, when set, is the expected owner of each orders partition
	// ("" for none; "a>b" for owned by a, pending to b).
	owners string
	state  State
	check  func(t *testing.T, g *ConsumerGroup)
}

func join(m string, timeout time.Duration, topics ...string) func(*ConsumerGroup, int64, *cgFakeTopics) error {
	return func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
		_, err := g.Join(now, JoinRequest{Member: m, Topics: topics, SessionTimeout: timeout}, tp)
		return err
	}
}

func heartbeat(m string, released ...int32) func(*ConsumerGroup, int64, *cgFakeTopics) error {
	return func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
		var rel []TopicPartition
		for _, p := range released {
			rel = append(rel, TopicPartition{"orders", p})
		}
		_, err := g.Heartbeat(now, m, rel, tp)
		return err
	}
}

func commit(m string, gen int64, p int32, off int64) func(*ConsumerGroup, int64, *cgFakeTopics) error {
	return func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
		if gen < 0 {
			gen = g.Generation
		}
		return g.Commit(now, m, gen, []OffsetCommit{{TopicPartition{"orders", p}, off}}, tp)
	}
}

func ownersOf(g *ConsumerGroup) string {
	t, ok := g.Topics["orders"]
	if !ok {
		return ""
	}
	var parts []string
	for _, p := range t.Partitions {
		s := p.Owner
		if p.Pending != "" {
			s += ">" + p.Pending
		}
		if s == "" {
			s = "-"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func committedOf(g *ConsumerGroup, p int32) int64 {
	return g.Topics["orders"].Partitions[p].Committed
}

func runCGScript(t *testing.T, steps []cgStep) *ConsumerGroup {
	t.Helper()
	g := NewConsumerGroup("billing")
	topics := newCGFakeTopics()
	for p := int32(0); p < 4; p++ {
		topics.ends[TopicPartition{"orders", p}] = 100
	}
	clock := &cgClock{now: int64(time.Hour)}
	for i, s := range steps {
		clock.advance(s.advance)
		before := g.Clone()
		err := s.do(g, clock.now, topics)
		if !errors.Is(err, s.wantErr) || (err != nil && s.wantErr == nil) {
			t.Fatalf("step %d: err %v, want %v", i, err, s.wantErr)
		}
		if err != nil && len(before.Members) == len(g.Members) && fmt.Sprint(ownersOf(before)) != fmt.Sprint(ownersOf(g)) {
			t.Fatalf("step %d: refused request changed ownership %q -> %q", i, ownersOf(before), ownersOf(g))
		}
		if s.owners != "" && ownersOf(g) != s.owners {
			t.Fatalf("step %d: owners %q, want %q", i, ownersOf(g), s.owners)
		}
		if s.state != "" && g.State() != s.state {
			t.Fatalf("step %d: state %s, want %s", i, g.State(), s.state)
		}
		if s.check != nil {
			s.check(t, g)
		}
	}
	return g
}

const sec = time.Second

func TestConsumerGroupScripts(t *testing.T) {
	tests := []struct {
		name  string
		steps []cgStep
	}{
		{
			name: "join, cooperative move on second join, release",
			steps: []cgStep{
				{do: join("a", 10*sec, "orders"), owners: "a a a a", state: StateStable},
				{do: commit("a", -1, 2, 7)},
				// b joins: two partitions wait for a to release them; a keeps
				// committing meanwhile.
				{advance: sec, do: join("b", 10*sec, "orders"), owners: "a a a>b a>b", state: StateRebalancing},
				{do: commit("a", -1, 2, 9), check: func(t *testing.T, g *ConsumerGroup) {
					if c := committedOf(g, 2); c != 9 {
						t.Fatalf("committed %d, want 9", c)
					}
				}},
				{do: heartbeat("a", 2, 3), owners: "a a b b"},
				{do: heartbeat("b"), state: StateStable},
				// a's commit for a partition it gave up is fenced.
				{do: commit("a", 1, 2, 11), wantErr: ErrStaleGeneration},
				{do: commit("b", -1, 2, 10), check: func(t *testing.T, g *ConsumerGroup) {
					if c := committedOf(g, 2); c != 10 {
						t.Fatalf("committed %d, want 10", c)
					}
				}},
			},
		},
		{
			name: "session timeout hands partitions over without moving committed offsets",
			steps: []cgStep{
				{do: join("a", 2*sec, "orders")},
				{do: join("b", 2*sec, "orders")},
				{do: heartbeat("a", 2, 3), owners: "a a b b"},
				{do: commit("b", -1, 3, 42)},
				// b goes silent; a keeps heartbeating.
				{advance: 1500 * time.Millisecond, do: heartbeat("a"), owners: "a a b b"},
				{advance: 1500 * time.Millisecond, do: heartbeat("a"), owners: "a a a a", check: func(t *testing.T, g *ConsumerGroup) {
					if _, ok := g.Members["b"]; ok {
						t.Fatal("b still a member after its session timeout")
					}
					if c := committedOf(g, 3); c != 42 {
						t.Fatalf("committed %d, want 42 (kept across the takeover)", c)
					}
				}},
				{do: commit("b", -1, 3, 50), wantErr: ErrUnknownMember},
				{do: heartbeat("b"), wantErr: ErrUnknownMember},
			},
		},
		{
			name: "leave hands over at once; empty group",
			steps: []cgStep{
				{do: join("a", 5*sec, "orders")},
				{do: join("b", 5*sec, "orders")},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error { g.Leave(now, "a", tp); return nil }, owners: "b b b b"},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error { g.Leave(now, "b", tp); return nil }, owners: "- - - -", state: StateEmpty},
			},
		},
		{
			name: "pending move forced after the owner's session timeout",
			steps: []cgStep{
				{do: join("a", 2*sec, "orders")},
				{do: join("b", 2*sec, "orders"), owners: "a a a>b a>b"},
				// a heartbeats but never releases.
				{advance: 1500 * time.Millisecond, do: heartbeat("a"), owners: "a a a>b a>b"},
				{do: heartbeat("b")},
				{advance: 1000 * time.Millisecond, do: heartbeat("b"), owners: "a a b b"},
			},
		},
		{
			name: "commit rules",
			steps: []cgStep{
				{do: join("a", 5*sec, "orders")},
				{do: commit("a", -1, 0, 101), wantErr: ErrOffsetAboveEnd},
				{do: commit("a", -1, 9, 1), wantErr: ErrInvalidGroupRequest},
				{do: commit("a", -1, 0, -1), wantErr: ErrInvalidGroupRequest},
				{do: commit("a", 99, 0, 1), wantErr: ErrInvalidGroupRequest},
				{do: commit("x", -1, 0, 1), wantErr: ErrUnknownMember},
				{do: commit("a", -1, 0, 100)},
				// Never backwards by a commit.
				{do: commit("a", -1, 0, 5), check: func(t *testing.T, g *ConsumerGroup) {
					if c := committedOf(g, 0); c != 100 {
						t.Fatalf("committed %d, want 100", c)
					}
				}},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
					return g.Commit(now, "a", g.Generation, []OffsetCommit{{TopicPartition{"nope", 0}, 1}}, tp)
				}, wantErr: ErrUnknownGroupTopic},
			},
		},
		{
			name: "reset fences live members and moves offsets back",
			steps: []cgStep{
				{do: join("a", 5*sec, "orders")},
				{do: commit("a", -1, 1, 60)},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
					return g.ResetOffsets(now, []OffsetCommit{{TopicPartition{"orders", 1}, 0}, {TopicPartition{"orders", 2}, 500}}, tp)
				}, check: func(t *testing.T, g *ConsumerGroup) {
					if c := committedOf(g, 1); c != 0 {
						t.Fatalf("partition 1 committed %d, want 0", c)
					}
					if c := committedOf(g, 2); c != 100 {
						t.Fatalf("partition 2 committed %d, want 100 (clamped to end)", c)
					}
				}, state: StateRebalancing},
				// The stale member's commit cannot undo the reset.
				{do: commit("a", 1, 1, 60), wantErr: ErrStaleGeneration},
				// Other partitions are not fenced.
				{do: commit("a", 1, 0, 3)},
				{do: heartbeat("a"), state: StateStable},
				{do: commit("a", -1, 1, 1)},
			},
		},
		{
			name: "join validation",
			steps: []cgStep{
				{do: join("", 5*sec, "orders"), wantErr: ErrInvalidGroupRequest},
				{do: join("a", time.Millisecond, "orders"), wantErr: ErrInvalidGroupRequest},
				{do: join("a", 5*sec), wantErr: ErrInvalidGroupRequest},
				{do: join("a", 5*sec, "nope"), wantErr: ErrUnknownGroupTopic},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
					_, err := g.Join(now, JoinRequest{Member: "a", Topics: []string{"orders"}, Reset: "sometimes"}, tp)
					return err
				}, wantErr: ErrInvalidGroupRequest, state: StateEmpty},
			},
		},
		{
			name: "members of different topics",
			steps: []cgStep{
				{do: join("a", 5*sec, "orders", "audit")},
				{do: join("b", 5*sec, "audit"), owners: "a a a a", check: func(t *testing.T, g *ConsumerGroup) {
					if o := g.Topics["audit"].Partitions[0].Owner; o != "a" {
						t.Fatalf("audit owner %q, want a (sticky)", o)
					}
				}},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error { g.Leave(now, "a", tp); return nil }, check: func(t *testing.T, g *ConsumerGroup) {
					if o := g.Topics["audit"].Partitions[0].Owner; o != "b" {
						t.Fatalf("audit owner %q, want b", o)
					}
				}, owners: "- - - -"},
			},
		},
		{
			name: "auto reset counts skipped records",
			steps: []cgStep{
				{do: join("a", 5*sec, "orders")},
				{do: commit("a", -1, 0, 10)},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
					c, err := g.AutoReset(now, "a", g.Generation, TopicPartition{"orders", 0}, 12, 30, tp)
					if c != 30 {
						return fmt.Errorf("committed %d, want 30", c)
					}
					return err
				}, check: func(t *testing.T, g *ConsumerGroup) {
					p := g.Topics["orders"].Partitions[0]
					if p.Skipped != 18 || p.AutoResets != 1 {
						t.Fatalf("skipped %d resets %d, want 18 and 1", p.Skipped, p.AutoResets)
					}
				}},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
					_, err := g.AutoReset(now, "a", 0, TopicPartition{"orders", 0}, 12, 30, tp)
					return err
				}, wantErr: ErrStaleGeneration},
			},
		},
		{
			name: "deleted and re-created topic drops offsets",
			steps: []cgStep{
				{do: join("a", 5*sec, "orders")},
				{do: commit("a", -1, 0, 10)},
				{do: func(g *ConsumerGroup, now int64, tp *cgFakeTopics) error {
					tp.inc["orders"] = 9
					_, err := g.Heartbeat(now, "a", nil, tp)
					if err != nil {
						return err
					}
					_, err = g.Join(now, JoinRequest{Member: "a", Topics: []string{"orders"}}, tp)
					return err
				}, check: func(t *testing.T, g *ConsumerGroup) {
					if c := committedOf(g, 0); c != -1 {
						t.Fatalf("committed %d after re-creation, want -1", c)
					}
				}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCGScript(t, tt.steps) })
	}
}

// TestConsumerGroupDeterministic replays one command sequence on two
// groups and compares every field: no map order or clock leaks in.
func TestConsumerGroupDeterministic(t *testing.T) {
	run := func() *ConsumerGroup {
		g := NewConsumerGroup("g")
		tp := newCGFakeTopics()
		now := int64(0)
		for i := range 30 {
			now += int64(300 * time.Millisecond)
			m := fmt.Sprintf("m%d", i%5)
			switch i % 3 {
			case 0:
				g.Join(now, JoinRequest{Member: m, Topics: []string{"orders", "audit"}, SessionTimeout: time.Second}, tp)
			case 1:
				a, _ := g.Heartbeat(now, m, nil, tp)
				g.Heartbeat(now, m, a.Revoke, tp)
			case 2:
				g.Leave(now, fmt.Sprintf("m%d", (i+2)%5), tp)
			}
		}
		return g
	}
	a, b := run(), run()
	if fmt.Sprintf("%+v", *a) == "" || !slices.Equal(a.MemberIDs(), b.MemberIDs()) || ownersOf(a) != ownersOf(b) || a.Generation != b.Generation {
		t.Fatalf("two runs differ: %s gen %d vs %s gen %d", ownersOf(a), a.Generation, ownersOf(b), b.Generation)
	}
}
