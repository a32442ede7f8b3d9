package fsm

import (
	"encoding/json"
	"fmt"
	"slices"
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

	// Consumer groups (10-19).
	CmdGroupJoin         CommandType = 10
	CmdGroupHeartbeat    CommandType = 11
	CmdGroupLeave        CommandType = 12
	CmdGroupCommit       CommandType = 13
	CmdGroupResetOffsets CommandType = 14
	CmdGroupAutoReset    CommandType = 15
	CmdGroupDelete       CommandType = 16

	// Topic settings, retention and compaction (20-29).

	// CmdAlterTopic changes a topic's settings.
	CmdAlterTopic CommandType = 20
	// CmdTrim deletes a partition's closed segments below an offset.
	CmdTrim CommandType = 21
	// CmdCompact swaps in the compaction of a partition's closed segments
	// below an offset.
	CmdCompact CommandType = 22

	// Queue groups (40-45), and their backpressure (46-59).
	CmdQueueCreate CommandType = 40
	CmdQueueAlter  CommandType = 41
	CmdQueueClaim  CommandType = 42
	CmdQueueAck    CommandType = 43
	CmdQueueNack   CommandType = 44
	CmdQueueExtend CommandType = 45
	// CmdQueuePause pauses or resumes a queue group.
	CmdQueuePause CommandType = 46

	// Cluster membership (60-69).

	// CmdNodeRegister records a node's advertised client API address.
	CmdNodeRegister CommandType = 60
	// CmdNodeDeregister forgets a removed node's address.
	CmdNodeDeregister CommandType = 61
)

// commandVersion is the payload version most kinds write after the type
// byte. A node that reads a version its row does not list stops instead of
// guessing.
const commandVersion = 1

// command is one row of the command table: what this build knows about one
// command kind. decode parses a payload of one of versions (scratch is the
// decoder's reusable memory, see keyScratch); apply applies the decoded
// body at a Raft index and the state machine's time. Both run on the Raft
// goroutine only.
type command struct {
	name     string
	versions []byte
	decode   func(p []byte, version byte, scratch *keyScratch) (any, error)
	apply    func(f *FSM, index uint64, now int64, body any) any
}

// commands is the command table, keyed by type. Adding a kind is adding a
// row here and an apply_<command>.go.
var commands = [...]command{
	CmdCreateTopic: jsonCommand("create-topic", (*FSM).applyCreateTopic),
	CmdDeleteTopic: jsonCommand("delete-topic", (*FSM).applyDeleteTopic),
	CmdAppend:      row("append", []byte{commandVersion, appendKeysVersion, appendKeysVersionV3}, decodeAppendPayload, (*FSM).applyAppend),

	CmdGroupJoin:         jsonCommand("group-join", (*FSM).applyGroupJoin),
	CmdGroupHeartbeat:    jsonCommand("group-heartbeat", (*FSM).applyGroupHeartbeat),
	CmdGroupLeave:        jsonCommand("group-leave", (*FSM).applyGroupLeave),
	CmdGroupCommit:       jsonCommand("group-commit", (*FSM).applyGroupCommit),
	CmdGroupResetOffsets: jsonCommand("group-reset-offsets", (*FSM).applyGroupResetOffsets),
	CmdGroupAutoReset:    jsonCommand("group-auto-reset", (*FSM).applyGroupAutoReset),
	CmdGroupDelete:       jsonCommand("group-delete", (*FSM).applyGroupDelete),

	CmdAlterTopic: jsonCommand("alter-topic", (*FSM).applyAlterTopic),
	CmdTrim:       jsonCommand("trim", (*FSM).applyTrim),
	CmdCompact:    jsonCommand("compact", (*FSM).applyCompact),

	CmdQueueCreate: jsonCommand("queue-create", (*FSM).applyQueueCreate),
	CmdQueueAlter:  jsonCommand("queue-alter", (*FSM).applyQueueAlter),
	CmdQueueClaim:  binaryCommand("queue-claim", decodeQueueClaim, (*FSM).applyQueueClaim),
	CmdQueueAck:    binaryCommand("queue-ack", decodeQueueAck, (*FSM).applyQueueAck),
	CmdQueueNack:   binaryCommand("queue-nack", decodeQueueNack, (*FSM).applyQueueNack),
	CmdQueueExtend: binaryCommand("queue-extend", decodeQueueExtend, (*FSM).applyQueueExtend),
	CmdQueuePause:  jsonCommand("queue-pause", (*FSM).applyQueuePause),

	CmdNodeRegister:   jsonCommand("node-register", (*FSM).applyNodeRegister),
	CmdNodeDeregister: jsonCommand("node-deregister", (*FSM).applyNodeDeregister),
}

// commandOf returns the row of t, or nil when this build does not know t.
func commandOf(t CommandType) *command {
	if int(t) >= len(commands) || commands[t].decode == nil {
		return nil
	}
	return &commands[t]
}

// reads reports whether this build decodes payload version v of the kind.
func (c *command) reads(v byte) bool { return slices.Contains(c.versions, v) }

func (t CommandType) String() string {
	if c := commandOf(t); c != nil {
		return c.name
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// row makes a table row from a typed decoder and apply function.
func row[T any](name string, versions []byte, decode func(p []byte, version byte, scratch *keyScratch) (T, error), apply func(f *FSM, index uint64, now int64, c T) any) command {
	return command{
		name:     name,
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
func jsonCommand[T any](name string, apply func(f *FSM, index uint64, now int64, c T) any) command {
	return row(name, []byte{commandVersion}, func(p []byte, _ byte, _ *keyScratch) (T, error) {
		var v T
		if err := json.Unmarshal(p, &v); err != nil {
			return v, fmt.Errorf("%w: %s: %v", ErrBadCommand, name, err)
		}
		return v, nil
	}, apply)
}

// binaryCommand is a row for a kind with a compact binary payload (version
// 1), read by decode from a reader that must be consumed whole.
func binaryCommand[T any](name string, decode func(r *reader) T, apply func(f *FSM, index uint64, now int64, c T) any) command {
	return row(name, []byte{commandVersion}, func(p []byte, _ byte, _ *keyScratch) (T, error) {
		r := reader{b: p}
		v := decode(&r)
		if r.err == nil && len(r.b) != 0 {
			r.err = fmt.Errorf("%d trailing bytes", len(r.b))
		}
		if r.err != nil {
			var zero T
			return zero, fmt.Errorf("%w: %s: %v", ErrBadCommand, name, r.err)
		}
		return v, nil
	}, apply)
}
