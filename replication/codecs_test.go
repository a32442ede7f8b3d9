package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestAppendCodecsFeatureGate: a snappy, lz4 or zstd batch is appended
// only once every member's build reads such batches at apply
// (fsm.CompressionLevel): before, Append refuses it with a
// *backend.FeatureLevelError naming the codec (and the entry itself would not
// pass the proposal gate), while gzip goes through; after, it is appended
// and every replica's state machine is at the level.
func TestAppendCodecsFeatureGate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newMemCluster(t, ctx, 3)
	n := c.nodes[0]
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	compress := func(codec batch.Compression, values ...string) []byte {
		b, err := batch.Compress(mustBatch(t, values...), codec)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	zstd := fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: compress(batch.CompressionZstd, "z1", "z2")}}}

	// The followers joined without registering a level: base.
	var fe *backend.FeatureLevelError
	if _, err := NewBackend(n).appendCommand(ctx, zstd); !errors.As(err, &fe) || !errors.Is(err, backend.ErrFeatureLevel) ||
		fe.Need != backend.FeatureLevel(fsm.CompressionLevel) || fe.Cluster != backend.FeatureLevel(fsm.BaseLevel) || fe.Command != "append of zstd batches" {
		t.Fatalf("zstd in a base-level cluster: %v", err)
	}
	if _, err := n.propose(ctx, fsm.EncodeAppend(n.cfg.Now().UnixNano(), zstd)); !errors.Is(err, backend.ErrFeatureLevel) {
		t.Fatalf("the zstd entry proposed directly: %v", err)
	}
	if err := n.CheckCompression(batch.CompressionGzip); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: compress(batch.CompressionGzip, "g0")}}}); err != nil {
		t.Fatalf("gzip: %v", err)
	}
	if err := n.register(ctx, fsm.NodeRegister{ID: "n2", APIAddress: "n2-api", FeatureLevel: fsm.Level}); err != nil {
		t.Fatal(err)
	}
	if err := n.register(ctx, fsm.NodeRegister{ID: "n3", APIAddress: "n3-api", FeatureLevel: fsm.SecurityLevel}); err != nil {
		t.Fatal(err)
	}
	for _, codec := range []batch.Compression{batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd} {
		if err := n.CheckCompression(codec); !errors.As(err, &fe) || fe.Cluster != backend.FeatureLevel(fsm.SecurityLevel) {
			t.Fatalf("%s with a member at level %d: %v", codec, fsm.SecurityLevel, err)
		}
	}
	for _, nd := range c.nodes {
		if got := nd.FSM().AppliedLevel(); got >= fsm.CompressionLevel {
			t.Fatalf("%s: applied level %d before any entry at it", nd.NodeID(), got)
		}
	}

	if err := n.register(ctx, fsm.NodeRegister{ID: "n3", APIAddress: "n3-api", FeatureLevel: fsm.Level}); err != nil {
		t.Fatal(err)
	}
	bases, err := NewBackend(n).appendCommand(ctx, zstd)
	if err != nil || bases[0] != 1 {
		t.Fatalf("zstd once every member reads it: %v, %v", bases, err)
	}
	for _, nd := range c.nodes {
		c.waitFor(ctx, nd.NodeID()+" applies the zstd append", func() bool { return nd.FSM().AppliedIndex() >= n.FSM().AppliedIndex() })
		if got := nd.FSM().AppliedLevel(); got != fsm.CompressionLevel {
			t.Fatalf("%s: applied level %d, want %d", nd.NodeID(), got, fsm.CompressionLevel)
		}
		p, err := nd.FSM().Partition("t", 0)
		if err != nil {
			t.Fatal(err)
		}
		data, err := p.Log().Read(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(data, 0, 0)
		if err != nil || len(recs) != 3 || string(recs[2].Value) != "z2" {
			t.Fatalf("%s: records %v, %v", nd.NodeID(), recs, err)
		}
	}
}

// TestSingleNodeCodecsAtOnce: a node counts at its own build's level
// before it has registered it, so a new cluster of one takes every codec
// from its first write.
func TestSingleNodeCodecsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), InMemory: true, Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	defer n.Close()
	if got := n.FSM().NodeFeatureLevel("n1"); got != fsm.BaseLevel {
		t.Fatalf("registered level %d; this test needs a node without one (no APIAdvertise)", got)
	}
	if err := n.CheckCompression(batch.CompressionLZ4); err != nil {
		t.Fatal(err)
	}
}
