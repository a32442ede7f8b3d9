package replication

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication/fsm"
)

// Feature levels (replication/fsm commands.go): every node registers the
// highest level its build understands in the replicated node registry
// (register.go: once caught up after a start, and again whenever the
// registry lacks it), and the cluster's level is the lowest registered by
// a member of the Raft configuration. A node proposes a command kind (or payload version) only
// when the cluster's level covers it, so during a rolling upgrade the
// upgraded nodes keep proposing what the older ones understand, and a new
// kind starts once the last node runs a build that knows it.
//
// Non-voters count too: they apply every entry like voters, and an older
// one would stop on a kind it does not know. A member that registered no
// level (a build before feature levels, or a node registered by the leader
// on its behalf) counts as fsm.BaseLevel.

// clusterLevel is the lowest feature level of the members, each member's
// level given by level (fsm.BaseLevel for one that registered none); with
// no members, fsm.BaseLevel.
func clusterLevel(members []string, level func(id string) fsm.FeatureLevel) fsm.FeatureLevel {
	if len(members) == 0 {
		return fsm.BaseLevel
	}
	out := fsm.Level
	for _, id := range members {
		out = min(out, level(id))
	}
	return out
}

// allows checks that a command needing level need may be proposed in a
// cluster at level cluster.
func allows(name string, need, cluster fsm.FeatureLevel) error {
	if need > cluster {
		return &backend.FeatureLevelError{Command: name, Need: backend.FeatureLevel(need), Cluster: backend.FeatureLevel(cluster)}
	}
	return nil
}

// buildLevel is the feature level this node registers and counts itself
// at: its build's, or Config.FeatureLevel's below it.
func (n *Node) buildLevel() fsm.FeatureLevel { return fsm.FeatureLevel(n.cfg.FeatureLevel) }

// featureLevel returns the cluster's feature level as this node sees it:
// the lowest level registered by a member of the current Raft
// configuration, this node counting at its own build's level whether it
// registered it yet or not (it proposes, and applies what it proposes
// with its own build), so a new cluster of one is at its level at once;
// never above this node's own level.
func (n *Node) featureLevel() (fsm.FeatureLevel, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return 0, mapRaftError(err)
	}
	servers := f.Configuration().Servers
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = string(s.ID)
	}
	own := n.buildLevel()
	return min(own, clusterLevel(ids, func(id string) fsm.FeatureLevel {
		if id == n.cfg.NodeID {
			return own
		}
		return n.fsm.NodeFeatureLevel(id)
	})), nil
}

// CheckCompression says whether batches compressed with c may be appended
// now: nil for none and gzip; for snappy, lz4 and zstd, nil once every
// member's build reads them at apply (fsm.CompressionLevel), a
// *backend.FeatureLevelError before. Node.Append checks it for every batch; a
// front end asks first to refuse one partition's batch alone.
func (n *Node) CheckCompression(c batch.Compression) error {
	need := fsm.CodecLevel(c)
	if need <= fsm.BaseLevel {
		return nil
	}
	cluster, err := n.featureLevel()
	if err != nil {
		return err
	}
	return allows(fmt.Sprintf("append of %s batches", c), need, cluster)
}

// checkFeatureLevel refuses to propose data (an encoded command) when the
// cluster's feature level does not cover it, or when this build would not
// apply it itself. Commands of fsm.BaseLevel, which every build
// understands, are not checked against the configuration.
func (n *Node) checkFeatureLevel(data []byte) error {
	need, name, err := fsm.EntryLevel(data)
	if err != nil {
		return err
	}
	if need <= fsm.BaseLevel {
		return nil
	}
	cluster, err := n.featureLevel()
	if err != nil {
		return err
	}
	return allows(name, need, cluster)
}

// CheckIdempotence says whether idempotent Kafka producers are served:
// nil once every member's build judges their batches at apply
// (fsm.ProducerLevel), a *backend.FeatureLevelError before.
func (n *Node) CheckIdempotence() error {
	cluster, err := n.featureLevel()
	if err != nil {
		return err
	}
	return allows("idempotent produce", fsm.ProducerLevel, cluster)
}

// CheckQueueStarts says whether a queue group's start offsets may be
// moved and a queue group deleted (AlterShareGroupOffsets and
// DeleteShareGroupOffsets): nil once every member's build applies those
// commands (fsm.QueueStartsLevel), a *backend.FeatureLevelError before.
func (n *Node) CheckQueueStarts() error {
	cluster, err := n.featureLevel()
	if err != nil {
		return err
	}
	return allows("moving a queue group's starts", fsm.QueueStartsLevel, cluster)
}
