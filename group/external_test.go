package group

import (
	"errors"
	"testing"
	"time"
)

func TestSetOffsets(t *testing.T) {
	orders := func(p int32, off int64) OffsetCommit {
		return OffsetCommit{TopicPartition: TopicPartition{"orders", p}, Offset: off}
	}
	committed := func(g *ConsumerGroup, p int32) int64 {
		tt, ok := g.Topics["orders"]
		if !ok {
			return -1
		}
		return tt.Partitions[p].Committed
	}
	tests := []struct {
		name string
		// setup prepares the group at time 0 (the clock is then at 1s).
		setup   func(g *ConsumerGroup, tp *cgFakeTopics)
		fence   int64
		offsets []OffsetCommit
		wantErr error
		check   func(t *testing.T, g *ConsumerGroup)
	}{
		{
			name: "commit on a new group", fence: 0, offsets: []OffsetCommit{orders(0, 5), orders(3, 0)},
			check: func(t *testing.T, g *ConsumerGroup) {
				if committed(g, 0) != 5 || committed(g, 3) != 0 || committed(g, 1) != -1 {
					t.Fatalf("committed %+v", g.Topics["orders"].Partitions)
				}
			},
		},
		{
			name:  "an offset moves backwards",
			setup: func(g *ConsumerGroup, tp *cgFakeTopics) { g.SetOffsets(0, 0, []OffsetCommit{orders(0, 9)}, tp) },
			fence: 0, offsets: []OffsetCommit{orders(0, 2)},
			check: func(t *testing.T, g *ConsumerGroup) {
				if committed(g, 0) != 2 {
					t.Fatalf("committed %d, want 2", committed(g, 0))
				}
			},
		},
		{
			name: "delete an offset",
			setup: func(g *ConsumerGroup, tp *cgFakeTopics) {
				g.SetOffsets(0, 0, []OffsetCommit{orders(0, 9), orders(1, 3)}, tp)
			},
			fence: NoFence, offsets: []OffsetCommit{orders(0, DeleteOffset), {TopicPartition{"audit", 0}, DeleteOffset}},
			check: func(t *testing.T, g *ConsumerGroup) {
				if committed(g, 0) != -1 || committed(g, 1) != 3 {
					t.Fatalf("committed %+v", g.Topics["orders"].Partitions)
				}
				if _, ok := g.Topics["audit"]; ok {
					t.Fatal("deleting an offset never committed made topic state")
				}
			},
		},
		{
			name: "a reset fences commits formed before it",
			setup: func(g *ConsumerGroup, tp *cgFakeTopics) {
				g.SetOffsets(0, 0, []OffsetCommit{orders(0, 9)}, tp)
				g.ResetOffsets(0, []OffsetCommit{orders(0, 1)}, tp)
			},
			fence: 0, offsets: []OffsetCommit{orders(0, 9)}, wantErr: ErrStaleGeneration,
			check: func(t *testing.T, g *ConsumerGroup) {
				if committed(g, 0) != 1 {
					t.Fatalf("committed %d, want the reset's 1", committed(g, 0))
				}
			},
		},
		{
			name: "formed after the reset",
			setup: func(g *ConsumerGroup, tp *cgFakeTopics) {
				g.ResetOffsets(0, []OffsetCommit{orders(0, 1)}, tp)
			},
			fence: 1, offsets: []OffsetCommit{orders(0, 4)},
			check: func(t *testing.T, g *ConsumerGroup) {
				if committed(g, 0) != 4 {
					t.Fatalf("committed %d, want 4", committed(g, 0))
				}
			},
		},
		{
			name: "without a fence a reset does not matter",
			setup: func(g *ConsumerGroup, tp *cgFakeTopics) {
				g.ResetOffsets(0, []OffsetCommit{orders(0, 1)}, tp)
			},
			fence: NoFence, offsets: []OffsetCommit{orders(0, 7)},
		},
		{
			name: "live logd members refuse",
			setup: func(g *ConsumerGroup, tp *cgFakeTopics) {
				g.Join(0, JoinRequest{Member: "m", Topics: []string{"orders"}, SessionTimeout: 10 * time.Second}, tp)
			},
			fence: NoFence, offsets: []OffsetCommit{orders(0, 7)}, wantErr: ErrUnknownMember,
			check: func(t *testing.T, g *ConsumerGroup) {
				if committed(g, 0) != -1 {
					t.Fatalf("committed %d after a refusal", committed(g, 0))
				}
			},
		},
		{
			name: "expired logd members do not refuse, but their expiry fences",
			setup: func(g *ConsumerGroup, tp *cgFakeTopics) {
				g.Join(0, JoinRequest{Member: "m", Topics: []string{"orders"}, SessionTimeout: 500 * time.Millisecond}, tp)
			},
			fence: 1, offsets: []OffsetCommit{orders(0, 7)}, wantErr: ErrStaleGeneration,
		},
		{name: "above the end", fence: NoFence, offsets: []OffsetCommit{orders(0, 11)}, wantErr: ErrOffsetAboveEnd},
		{name: "below -1", fence: NoFence, offsets: []OffsetCommit{orders(0, -2)}, wantErr: ErrInvalidGroupRequest},
		{name: "unknown topic", fence: NoFence, offsets: []OffsetCommit{{TopicPartition{"nope", 0}, 1}}, wantErr: ErrUnknownGroupTopic},
		{name: "unknown partition", fence: NoFence, offsets: []OffsetCommit{orders(4, 1)}, wantErr: ErrInvalidGroupRequest},
		{name: "no offsets", fence: NoFence, wantErr: ErrInvalidGroupRequest},
		{name: "bad fence", fence: -2, offsets: []OffsetCommit{orders(0, 1)}, wantErr: ErrInvalidGroupRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newCGFakeTopics()
			for p := range int32(4) {
				tp.ends[TopicPartition{"orders", p}] = 10
			}
			g := NewConsumerGroup("g")
			if tt.setup != nil {
				tt.setup(g, tp)
			}
			before := g.Clone()
			err := g.SetOffsets(int64(time.Second), tt.fence, tt.offsets, tp)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("SetOffsets: %v, want %v", err, tt.wantErr)
			}
			if err != nil && tt.wantErr != ErrStaleGeneration && committed(g, 0) != committed(before, 0) {
				t.Fatalf("a refused commit changed the offset from %d to %d", committed(before, 0), committed(g, 0))
			}
			if tt.check != nil {
				tt.check(t, g)
			}
		})
	}
}

func TestFence(t *testing.T) {
	tp := newCGFakeTopics()
	g := NewConsumerGroup("g")
	if gen, live := g.Fence(0); gen != 0 || live != 0 {
		t.Fatalf("new group: %d, %d", gen, live)
	}
	if _, err := g.Join(0, JoinRequest{Member: "m", Topics: []string{"orders"}, SessionTimeout: time.Second}, tp); err != nil {
		t.Fatal(err)
	}
	if gen, live := g.Fence(int64(time.Second)); gen != 1 || live != 1 {
		t.Fatalf("with a member: %d, %d", gen, live)
	}
	if gen, live := g.Fence(int64(2 * time.Second)); gen != 1 || live != 0 {
		t.Fatalf("after its session: %d, %d", gen, live)
	}
}
