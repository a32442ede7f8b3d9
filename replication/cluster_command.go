package replication

import (
	"fmt"
)

// Cluster membership command types (issue 9; 60-69 are reserved for them).
const (
	// CmdNodeRegister records a node's advertised client API address.
	CmdNodeRegister CommandType = 60
	// CmdNodeDeregister forgets a removed node's address.
	CmdNodeDeregister CommandType = 61
)

// NodeRegister records that node ID serves its client API at APIAddress
// (host:port, as advertised). Any node uses the registry to forward writes
// to the leader and to fetch segment bytes from a peer during snapshot
// catch-up, so it is replicated state and part of every snapshot.
type NodeRegister struct {
	ID         string `json:"id"`
	APIAddress string `json:"api_address"`
}

// NodeDeregister forgets a node that was removed from the cluster.
type NodeDeregister struct {
	ID string `json:"id"`
}

// clusterCommand is a decoded membership command.
type clusterCommand interface {
	applyCluster(f *FSM, index uint64) any
}

func (c NodeRegister) applyCluster(f *FSM, index uint64) any { return f.applyNodeRegister(c) }

func (c NodeDeregister) applyCluster(f *FSM, index uint64) any { return f.applyNodeDeregister(c) }

func clusterCommandName(t CommandType) string {
	switch t {
	case CmdNodeRegister:
		return "node-register"
	case CmdNodeDeregister:
		return "node-deregister"
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

func decodeClusterCommand(t CommandType, p []byte) (clusterCommand, error) {
	switch t {
	case CmdNodeRegister:
		v, err := decodeJSON[NodeRegister](t, p)
		return v, err
	case CmdNodeDeregister:
		v, err := decodeJSON[NodeDeregister](t, p)
		return v, err
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownCommand, t)
}
