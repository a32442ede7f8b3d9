package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/logd-dev/logd/backend"
)

// CommandType is the first byte of every Raft log entry the FSM applies.
// Values are persisted in Raft logs and snapshots: never renumber them.
type CommandType uint8

// The command types, grouped by concern in ranges. Each has one row in
// commands and its apply function in its own apply_<command>.go.
const (
	// Topics and produce.
	CmdCreateTopic CommandType = 1
	CmdDeleteTopic CommandType = 2
	CmdAppend      CommandType = 3
	// CmdProducerInit allocates a Kafka producer id, at ProducerLevel.
	CmdProducerInit CommandType = 4
	// CmdPartitionAdopt opens partitions of a topic in a data group's
	// state machine, at DataGroupLevel.
	CmdPartitionAdopt CommandType = 5
	// CmdAppendMany is several appends coalesced into one entry, at
	// CoalesceLevel.
	CmdAppendMany CommandType = 6

	// Consumer groups (10-19).
	CmdGroupJoin         CommandType = 10
	CmdGroupHeartbeat    CommandType = 11
	CmdGroupLeave        CommandType = 12
	CmdGroupCommit       CommandType = 13
	CmdGroupResetOffsets CommandType = 14
	CmdGroupAutoReset    CommandType = 15
	CmdGroupDelete       CommandType = 16
	// CmdGroupSetOffsets sets the offsets of a group coordinated outside
	// the state machine (a Kafka consumer group), at ExternalGroupsLevel.
	CmdGroupSetOffsets CommandType = 17
	// CmdGroupPlace records the data group a consumer group's state lives
	// in (its home), in the meta group, at HashedGroupsLevel.
	CmdGroupPlace CommandType = 18
	// CmdGroupHosted is a consumer group command applied in the group's
	// home data group, with what it needs of the meta group's topics, at
	// HashedGroupsLevel.
	CmdGroupHosted CommandType = 19

	// Topic settings, retention and compaction (20-29).

	// CmdAlterTopic changes a topic's settings.
	CmdAlterTopic CommandType = 20
	// CmdTrim deletes a partition's closed segments below an offset.
	CmdTrim CommandType = 21
	// CmdCompact swaps in the compaction of a partition's closed segments
	// below an offset.
	CmdCompact CommandType = 22
	// CmdCreatePartitions grows a topic's partition count, at
	// PartitionsLevel.
	CmdCreatePartitions CommandType = 23

	// Queue groups (40-45), and their backpressure (46-59).
	CmdQueueCreate CommandType = 40
	CmdQueueAlter  CommandType = 41
	CmdQueueClaim  CommandType = 42
	CmdQueueAck    CommandType = 43
	CmdQueueNack   CommandType = 44
	CmdQueueExtend CommandType = 45
	// CmdQueuePause pauses or resumes a queue group.
	CmdQueuePause CommandType = 46
	// CmdQueueRelease ends a worker's live leases, at QueueReleaseLevel.
	CmdQueueRelease CommandType = 47
	// CmdQueueSetStarts moves a queue group's start offsets, at
	// QueueStartsLevel.
	CmdQueueSetStarts CommandType = 48
	// CmdQueueDelete deletes a queue group, at QueueStartsLevel.
	CmdQueueDelete CommandType = 49

	// Cluster membership (60-69).

	// CmdNodeRegister records a node's advertised client API address.
	CmdNodeRegister CommandType = 60
	// CmdNodeDeregister forgets a removed node's address.
	CmdNodeDeregister CommandType = 61
	// CmdDataGroups replaces the table of data groups, at
	// DataGroupLevel.
	CmdDataGroups CommandType = 62

	// Tokens and ACLs (70-79), at SecurityLevel.

	// CmdTokenCreate stores a bearer token's verifier.
	CmdTokenCreate CommandType = 70
	// CmdTokenRevoke removes a token's verifier.
	CmdTokenRevoke CommandType = 71
	// CmdACLCreate adds ACLs.
	CmdACLCreate CommandType = 72
	// CmdACLDelete removes the ACLs a filter matches.
	CmdACLDelete CommandType = 73
	// CmdSCRAMSet sets a user's SCRAM credential, at SCRAMLevel.
	CmdSCRAMSet CommandType = 74
	// CmdSCRAMDelete deletes a user's SCRAM credential, at SCRAMLevel.
	CmdSCRAMDelete CommandType = 75

	// Redrive jobs (80-89), at RedriveLevel.

	// CmdRedrive starts, advances, stops or ends a redrive job
	// (apply_redrive.go).
	CmdRedrive CommandType = 80

	// Kafka share groups (90-99).

	// CmdShareGroupConfig sets and deletes a share group's settings, at
	// ShareConfigLevel.
	CmdShareGroupConfig CommandType = 90
)

// FeatureLevel numbers what a build's state machine understands: a build
// at level L decodes and applies every command kind, and every payload
// version, introduced at a level up to L. A later build that adds a kind
// (or a payload version) gives it a new level and raises Level. A node
// proposes it only once every member of the cluster registered a level at
// least as high (package replication), so a rolling upgrade never hands an
// older replica an entry it would stop on.
//
// A level can also change how entries of older kinds apply, where a build
// at it decides differently from one below it: the state machine keeps the
// highest level any applied entry needed (FSM.AppliedLevel, replicated
// state, in snapshots), which proves every member reached it, and applies
// by that rather than by its build (CompressionLevel).
type FeatureLevel uint32

const (
	// BaseLevel is the level of every kind that existed before feature
	// levels; a node that registered no level understands exactly these.
	BaseLevel FeatureLevel = 1
	// QuotaLevel adds cluster quotas to create-topic (payload version
	// createTopicQuotaVersion).
	QuotaLevel FeatureLevel = 2
	// SecurityLevel adds tokens and ACLs (CmdTokenCreate to CmdACLDelete),
	// and a topic's creating principal with per-principal quotas
	// (create-topic payload version createTopicPrincipalVersion).
	SecurityLevel FeatureLevel = 3
	// CompressionLevel adds record batches compressed with snappy, lz4 and
	// zstd (gzip and none came before): an append carrying one is written
	// in payload version appendCodecsVersion, and once an entry at this
	// level has been applied (AppliedLevel), queue claims deliver the
	// records of such batches and compaction reads them, where builds
	// before it skipped them and stalled.
	CompressionLevel FeatureLevel = 4
	// ExternalGroupsLevel adds the offsets of consumer groups coordinated
	// outside the state machine (CmdGroupSetOffsets): Kafka consumer
	// groups, whose coordinator keeps their members in memory.
	ExternalGroupsLevel FeatureLevel = 5
	// QueueLevel adds a claim's worker id (queue-claim payload version
	// queueClaimWorkerVersion, which the proposer writes for every claim
	// once the cluster is at this level) and the topic setting
	// queue.max.backlog.age.ms (create-topic and alter-topic payload
	// versions createTopicQueueVersion and alterTopicQueueVersion). Once an entry at this level has
	// been applied, queue groups count the exact bytes of their backlog
	// (queue.Group.SetExactBytes) where builds before estimated them, and
	// admission control decides by those.
	QueueLevel FeatureLevel = 6
	// PartitionsLevel adds the growth of a topic's partition count
	// (CmdCreatePartitions).
	PartitionsLevel FeatureLevel = 7
	// RedriveLevel adds redrive jobs run by the leader (CmdRedrive): a
	// job's definition, state and counters are replicated, its position
	// is the committed offsets of its consumer group (RedriveGroup).
	RedriveLevel FeatureLevel = 8
	// RedriveSelectLevel adds a redrive job that moves named dead letters
	// only (RedriveSpec.Records, redrive payload version
	// redriveRecordsVersion): a build below it would ignore the field and
	// redrive every dead letter its filter selects.
	RedriveSelectLevel FeatureLevel = 9
	// SessionLevel adds no command: a node at it speaks the Raft port's
	// sessions and proves the cluster secret (replication/transport), so
	// once every member registered it, a cluster of an earlier build gets
	// a secret (replication's secret.go). Apply decides nothing by it.
	SessionLevel FeatureLevel = 10
	// ProducerLevel adds idempotent Kafka producers: producer ids
	// (CmdProducerInit) and appends judged by their partition's producer
	// state (append payload version appendProducerVersion), which a build
	// below it would append without looking at their sequences.
	ProducerLevel FeatureLevel = 11
	// SCRAMLevel adds SCRAM credentials (CmdSCRAMSet, CmdSCRAMDelete) to
	// the security state, and to its snapshot section.
	SCRAMLevel FeatureLevel = 12
	// QueueReleaseLevel adds the release of a worker's live leases in a
	// queue group (CmdQueueRelease), which the Kafka listener proposes for
	// a share-group member whose session ended.
	QueueReleaseLevel FeatureLevel = 13
	// DataGroupLevel adds topics hosted over several data groups: a
	// placement in create-topic and create-partitions (payload versions
	// createTopicPlacementVersion and createPartitionsPlacementVersion),
	// which a build below it would ignore and open every partition, and
	// the adoption of partitions by a data group's state machine
	// (CmdPartitionAdopt), and the meta group's table of data groups
	// (CmdDataGroups), whose Raft groups each node runs beside the meta
	// group (package replication). See docs/architecture.md, "Data
	// groups".
	DataGroupLevel FeatureLevel = 14
	// QueueStartsLevel adds moving a queue group's start offsets
	// (CmdQueueSetStarts) and deleting a queue group (CmdQueueDelete),
	// which the Kafka listener proposes for AlterShareGroupOffsets and
	// DeleteShareGroupOffsets.
	QueueStartsLevel FeatureLevel = 15
	// PlacedGroupsLevel adds consumer groups over topics placed on data
	// groups: group-commit, group-reset-offsets, group-auto-reset and
	// group-set-offsets carry the ends of partitions another data group
	// hosts (payload version groupEndsVersion, PartitionEnd), and so does
	// a redrive's advance (redriveEndsVersion), which a build below it
	// would refuse as hosted elsewhere or above the end; and the table
	// of data groups names the nodes being drained (data-groups payload
	// version dataGroupsDrainVersion).
	PlacedGroupsLevel FeatureLevel = 16
	// CoalesceLevel adds appends coalesced into one entry
	// (CmdAppendMany), several to one partition at one index, which a
	// build below it would write only the first of on replay.
	CoalesceLevel FeatureLevel = 17
	// MovesLevel adds the moves in progress to the table of data groups
	// (DataGroup.Move, data-groups payload version dataGroupsMoveVersion),
	// which a build below it would drop, and with them what a new meta
	// leader knows is moving.
	MovesLevel FeatureLevel = 18
	// ShareConfigLevel adds the settings of Kafka share groups to the
	// meta group's state (CmdShareGroupConfig, in snapshots), which the
	// Kafka listener kept in the leader's memory before: below it the
	// listener refuses to change them.
	ShareConfigLevel FeatureLevel = 19
	// HashedGroupsLevel adds consumer groups kept in data groups: the
	// meta group records each new group's home, a data group chosen by a
	// hash of its name (CmdGroupPlace), and refuses commands on a group
	// whose home is another data group; the home applies the group's
	// commands wrapped with the meta group's topics they need
	// (CmdGroupHosted). See docs/architecture.md, "Consumer groups".
	HashedGroupsLevel FeatureLevel = 20
	// BinaryCallsLevel adds no command: a node at it understands the
	// binary form of the produce and append calls one node sends
	// another over the Raft port (package replication, call_binary.go),
	// so once every member registered it, a node sends those calls in
	// it rather than in JSON. Apply decides nothing by it.
	BinaryCallsLevel FeatureLevel = 21
	// Level is the highest feature level this build understands.
	Level FeatureLevel = BinaryCallsLevel
)

// commandVersion is the payload version most kinds write after the type
// byte. A node that reads a version its row does not list stops instead of
// guessing.
const commandVersion = 1

// command is one row of the command table: what this build knows about one
// command kind. level is the feature level that introduced the kind, and
// versions the payload versions this build reads, each with the level that
// introduced it. decode parses a payload of one of versions (scratch is the
// decoder's reusable memory, see keyScratch); apply applies the decoded
// body at a Raft index and the state machine's time. Both run on the Raft
// goroutine only.
type command struct {
	name     string
	level    FeatureLevel
	versions []payloadVersion
	decode   func(p []byte, version byte, scratch *keyScratch) (any, error)
	apply    func(f *FSM, index uint64, now int64, body any) any
}

// payloadVersion is a payload version and the feature level that
// introduced it.
type payloadVersion struct {
	version byte
	level   FeatureLevel
}

// v1 is the payload version of a kind that has only ever had one.
var v1 = []payloadVersion{{version: commandVersion, level: BaseLevel}}

// appendVersions are the payload versions of an append.
var appendVersions = []payloadVersion{
	{version: commandVersion, level: BaseLevel},             // without idempotency keys
	{version: appendKeysVersion, level: BaseLevel},          // read only
	{version: appendKeysVersionV3, level: BaseLevel},        // with keys
	{version: appendCodecsVersion, level: CompressionLevel}, // with a snappy, lz4 or zstd batch
	{version: appendProducerVersion, level: ProducerLevel},  // with an idempotent producer's batch
}

// commands is the command table, keyed by type. Adding a kind is adding a
// row here (with a new feature level, see FeatureLevel) and an
// apply_<command>.go.
var commands = [...]command{
	CmdCreateTopic: row("create-topic", BaseLevel, []payloadVersion{
		{version: commandVersion, level: BaseLevel},
		{version: createTopicQuotaVersion, level: QuotaLevel},         // with a quota
		{version: createTopicPrincipalVersion, level: SecurityLevel},  // with a principal
		{version: createTopicQueueVersion, level: QueueLevel},         // with a setting of QueueLevel
		{version: createTopicPlacementVersion, level: DataGroupLevel}, // with a placement
	}, decodeCreateTopic, (*FSM).applyCreateTopic),
	CmdDeleteTopic: row("delete-topic", BaseLevel, []payloadVersion{
		{version: commandVersion, level: BaseLevel},
		{version: deleteTopicIndexVersion, level: DataGroupLevel}, // naming the incarnation
	}, decodeDeleteTopic, (*FSM).applyDeleteTopic),
	CmdAppend:       row("append", BaseLevel, appendVersions, decodeAppendPayload, (*FSM).applyAppend),
	CmdProducerInit: jsonCommand("producer-init", ProducerLevel, (*FSM).applyProducerInit),
	CmdAppendMany:   binaryCommand("append-many", CoalesceLevel, func(r *reader) AppendMany { return decodeAppendMany(r, 0) }, (*FSM).applyAppendMany),

	CmdGroupJoin:         jsonCommand("group-join", BaseLevel, (*FSM).applyGroupJoin),
	CmdGroupHeartbeat:    jsonCommand("group-heartbeat", BaseLevel, (*FSM).applyGroupHeartbeat),
	CmdGroupLeave:        jsonCommand("group-leave", BaseLevel, (*FSM).applyGroupLeave),
	CmdGroupCommit:       groupJSONCommand("group-commit", (*FSM).applyGroupCommit),
	CmdGroupResetOffsets: groupJSONCommand("group-reset-offsets", (*FSM).applyGroupResetOffsets),
	CmdGroupAutoReset:    groupJSONCommand("group-auto-reset", (*FSM).applyGroupAutoReset),
	CmdGroupDelete:       jsonCommand("group-delete", BaseLevel, (*FSM).applyGroupDelete),
	CmdGroupSetOffsets: row("group-set-offsets", ExternalGroupsLevel, []payloadVersion{
		{version: commandVersion, level: ExternalGroupsLevel},
		{version: groupEndsVersion, level: PlacedGroupsLevel}, // with ends of partitions hosted elsewhere
	}, binaryDecoder("group-set-offsets", decodeGroupSetOffsets), (*FSM).applyGroupSetOffsets),
	CmdGroupPlace:  jsonCommand("group-place", HashedGroupsLevel, (*FSM).applyGroupPlace),
	CmdGroupHosted: row("group-hosted", HashedGroupsLevel, v1, decodeGroupHosted, (*FSM).applyGroupHosted),

	CmdAlterTopic: row("alter-topic", BaseLevel, []payloadVersion{
		{version: commandVersion, level: BaseLevel},
		{version: alterTopicQueueVersion, level: QueueLevel}, // with a setting of QueueLevel
	}, decodeAlterTopic, (*FSM).applyAlterTopic),
	CmdTrim:    jsonCommand("trim", BaseLevel, (*FSM).applyTrim),
	CmdCompact: jsonCommand("compact", BaseLevel, (*FSM).applyCompact),

	CmdCreatePartitions: row("create-partitions", PartitionsLevel, []payloadVersion{
		{version: commandVersion, level: PartitionsLevel},
		{version: createPartitionsPlacementVersion, level: DataGroupLevel}, // with a placement
	}, decodeCreatePartitions, (*FSM).applyCreatePartitions),
	CmdPartitionAdopt: jsonCommand("partition-adopt", DataGroupLevel, (*FSM).applyPartitionAdopt),

	CmdQueueCreate: jsonCommand("queue-create", BaseLevel, (*FSM).applyQueueCreate),
	CmdQueueAlter:  jsonCommand("queue-alter", BaseLevel, (*FSM).applyQueueAlter),
	CmdQueueClaim: row("queue-claim", BaseLevel, []payloadVersion{
		{version: commandVersion, level: BaseLevel},
		{version: queueClaimWorkerVersion, level: QueueLevel}, // with a worker id
	}, binaryDecoder("queue-claim", decodeQueueClaim), (*FSM).applyQueueClaim),
	CmdQueueAck:       binaryCommand("queue-ack", BaseLevel, decodeQueueAck, (*FSM).applyQueueAck),
	CmdQueueNack:      binaryCommand("queue-nack", BaseLevel, decodeQueueNack, (*FSM).applyQueueNack),
	CmdQueueExtend:    binaryCommand("queue-extend", BaseLevel, decodeQueueExtend, (*FSM).applyQueueExtend),
	CmdQueuePause:     jsonCommand("queue-pause", BaseLevel, (*FSM).applyQueuePause),
	CmdQueueRelease:   jsonCommand("queue-release", QueueReleaseLevel, (*FSM).applyQueueRelease),
	CmdQueueSetStarts: jsonCommand("queue-set-starts", QueueStartsLevel, (*FSM).applyQueueSetStarts),
	CmdQueueDelete:    jsonCommand("queue-delete", QueueStartsLevel, (*FSM).applyQueueDelete),

	CmdNodeRegister:   jsonCommand("node-register", BaseLevel, (*FSM).applyNodeRegister),
	CmdNodeDeregister: jsonCommand("node-deregister", BaseLevel, (*FSM).applyNodeDeregister),
	CmdDataGroups: row("data-groups", DataGroupLevel, []payloadVersion{
		{version: commandVersion, level: DataGroupLevel},
		{version: dataGroupsDrainVersion, level: PlacedGroupsLevel}, // naming nodes to drain
		{version: dataGroupsMoveVersion, level: MovesLevel},         // with moves in progress
	}, decodeDataGroups, (*FSM).applyDataGroups),

	CmdTokenCreate: securityCommand("token-create", decodeTokenCreate, (*FSM).applyTokenCreate),
	CmdTokenRevoke: securityCommand("token-revoke", decodeTokenRevoke, (*FSM).applyTokenRevoke),
	CmdACLCreate:   securityCommand("acl-create", decodeACLCreate, (*FSM).applyACLCreate),
	CmdACLDelete:   securityCommand("acl-delete", decodeACLDelete, (*FSM).applyACLDelete),
	CmdSCRAMSet:    leveledSecurityCommand("scram-set", SCRAMLevel, decodeSCRAMSet, (*FSM).applySCRAMSet),
	CmdSCRAMDelete: leveledSecurityCommand("scram-delete", SCRAMLevel, decodeSCRAMDelete, (*FSM).applySCRAMDelete),

	CmdRedrive: row("redrive", RedriveLevel, []payloadVersion{
		{version: commandVersion, level: RedriveLevel},
		{version: redriveRecordsVersion, level: RedriveSelectLevel}, // a start naming its records
		{version: redriveEndsVersion, level: PlacedGroupsLevel},     // an advance with ends of partitions hosted elsewhere
	}, decodeRedrive, (*FSM).applyRedrive),

	CmdShareGroupConfig: jsonCommand("share-group-config", ShareConfigLevel, (*FSM).applyShareGroupConfig),
}

// commandOf returns the row of t, or nil when this build does not know t.
func commandOf(t CommandType) *command {
	if int(t) >= len(commands) || commands[t].decode == nil {
		return nil
	}
	return &commands[t]
}

// levelOf returns the feature level a replica needs to apply the kind in
// payload version v: the later of the kind's and the version's.
func (c *command) levelOf(v byte) (FeatureLevel, bool) {
	for _, pv := range c.versions {
		if pv.version == v {
			return max(c.level, pv.level), true
		}
	}
	return 0, false
}

// EntryLevel returns the feature level a replica needs to apply the
// encoded command data (sealed or not), and the command's name. A command
// this build would not apply itself is backend.ErrUnknownCommand: it must never be
// proposed.
func EntryLevel(data []byte) (FeatureLevel, string, error) {
	if len(data) < cmdHeaderSize {
		return 0, "", fmt.Errorf("%w: %d bytes", backend.ErrBadCommand, len(data))
	}
	t := CommandType(data[0])
	c := commandOf(t)
	if c == nil {
		return 0, "", fmt.Errorf("%w: %s", backend.ErrUnknownCommand, t)
	}
	level, ok := c.levelOf(data[1] &^ entryChecksumFlag)
	if !ok {
		return 0, "", fmt.Errorf("%w: %s version %d", backend.ErrUnknownCommand, t, data[1]&^entryChecksumFlag)
	}
	return level, c.name, nil
}

func (t CommandType) String() string {
	if c := commandOf(t); c != nil {
		return c.name
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// row makes a table row from a typed decoder and apply function.
func row[T any](name string, level FeatureLevel, versions []payloadVersion, decode func(p []byte, version byte, scratch *keyScratch) (T, error), apply func(f *FSM, index uint64, now int64, c T) any) command {
	return command{
		name:     name,
		level:    level,
		versions: versions,
		decode: func(p []byte, version byte, scratch *keyScratch) (any, error) {
			c, err := decode(p, version, scratch)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		apply: func(f *FSM, index uint64, now int64, body any) any { return apply(f, index, now, body.(T)) },
	}
}

// jsonCommand is a row for a kind with a JSON payload (version 1). Metadata
// commands are rare and small, so JSON keeps them readable in a raft log
// dump, and a field added later is ignored by builds that do not know it.
func jsonCommand[T any](name string, level FeatureLevel, apply func(f *FSM, index uint64, now int64, c T) any) command {
	return row(name, level, v1, func(p []byte, _ byte, _ *keyScratch) (T, error) {
		var v T
		if err := json.Unmarshal(p, &v); err != nil {
			return v, fmt.Errorf("%w: %s: %v", backend.ErrBadCommand, name, err)
		}
		return v, nil
	}, apply)
}

// binaryCommand is a row for a kind with a compact binary payload (version
// 1), read by decode from a reader that must be consumed whole.
func binaryCommand[T any](name string, level FeatureLevel, decode func(r *reader) T, apply func(f *FSM, index uint64, now int64, c T) any) command {
	return row(name, level, v1, binaryDecoder(name, func(r *reader, _ byte) T { return decode(r) }), apply)
}

// binaryDecoder makes a row's decoder from a reader of one payload (of
// the given version) that must be consumed whole.
func binaryDecoder[T any](name string, decode func(r *reader, version byte) T) func(p []byte, version byte, _ *keyScratch) (T, error) {
	return func(p []byte, version byte, _ *keyScratch) (T, error) {
		r := reader{b: p}
		v := decode(&r, version)
		if r.err == nil && len(r.b) != 0 {
			r.err = fmt.Errorf("%d trailing bytes", len(r.b))
		}
		if r.err != nil {
			var zero T
			return zero, fmt.Errorf("%w: %s: %v", backend.ErrBadCommand, name, r.err)
		}
		return v, nil
	}
}
