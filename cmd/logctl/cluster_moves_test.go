package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// TestClusterMovesCLI: a single node with data groups has no moves and
// nothing to balance (its one node holds every replica); one without data
// groups has nothing either; bad input is a usage error (exit 2), under
// --output json an error object.
func TestClusterMovesCLI(t *testing.T) {
	t.Run("data groups", func(t *testing.T) {
		srv := logdtest.Start(t, logdtest.Options{DataGroupsPerNode: 2})
		runSteps(t, srv, []step{
			{args: args("cluster moves"), stdoutExact: "no replica moves in progress\n"},
			{args: args("cluster balance --dry-run"), stdout: []string{`^balanced: no replica moves \(2 data groups over 1 node\)\n\n`,
				`(?m)^NODE\s+REPLICAS BEFORE\s+REPLICAS AFTER\s+LEADS BEFORE\s+LEADS AFTER$`, `(?m)^node-1\s+2\s+2\s+2\s+2\n$`},
				stderr: []string{`(?m)^logctl: dry run: nothing changed; balancing runs on its own on the meta leader`}},
			{args: args("cluster balance --dry-run -o yaml"), stdout: []string{`(?m)^steps: \[\]$`, `(?m)^groups: 2$`}},
			{args: args("cluster balance"), wantCode: exitUsage, stderr: []string{`^logctl: balancing runs on its own on the meta leader, at most logd's --max-moves replica moves at once \(-1 switches it off\): there is nothing to start; --dry-run shows what it would move\n$`}},
			{args: args("cluster balance -o json"), wantCode: exitUsage, stderr: []string{`^\{"error":\{"code":2,"message":"balancing runs on its own`}},
			{args: args("cluster balance --dry-run --output bogus"), wantCode: exitUsage, stderr: []string{`--output "bogus": want text, json or yaml`}},
			{args: args("cluster moves --output bogus"), wantCode: exitUsage, stderr: []string{`^logctl: --output "bogus": want text, json or yaml\n$`}},
			{args: args("cluster moves --bogus"), wantCode: exitUsage, stderr: []string{`unknown flag: --bogus`}},
			{args: args("cluster moves n1"), wantCode: exitUsage, stderr: []string{`unknown command "n1"`}},
			{args: args("cluster balance --dry-run=maybe"), wantCode: exitUsage, stderr: []string{`invalid argument "maybe"`}},
		})
		// The JSON shapes scripts read.
		var moves map[string]any
		if err := json.Unmarshal([]byte(mustRun(t, srv, "", "cluster", "moves", "-o", "json").stdout), &moves); err != nil {
			t.Fatal(err)
		}
		if list, ok := moves["moves"].([]any); !ok || len(list) != 0 || moves["node"] != "node-1" || len(moves) != 2 {
			t.Errorf("cluster moves -o json = %v, want node node-1 and moves []", moves)
		}
		var plan struct {
			Node              string            `json:"node"`
			Groups            int               `json:"groups"`
			ReplicationFactor int               `json:"replication_factor"`
			Nodes             []string          `json:"nodes"`
			Steps             []json.RawMessage `json:"steps"`
			Loads             []map[string]any  `json:"loads"`
			InProgress        *int              `json:"in_progress"`
			Truncated         *bool             `json:"truncated"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, srv, "", "cluster", "balance", "--dry-run", "-o", "json").stdout), &plan); err != nil {
			t.Fatal(err)
		}
		if plan.Node != "node-1" || plan.Groups != 2 || plan.ReplicationFactor != 3 || len(plan.Nodes) != 1 || plan.Steps == nil || len(plan.Steps) != 0 ||
			len(plan.Loads) != 1 || plan.InProgress == nil || *plan.InProgress != 0 || plan.Truncated == nil || *plan.Truncated {
			t.Errorf("cluster balance --dry-run -o json = %+v", plan)
		}
		want := map[string]any{"node": "node-1", "draining": false, "replicas_before": 2.0, "replicas_after": 2.0, "leads_before": 2.0, "leads_after": 2.0, "bytes_before": 0.0, "bytes_after": 0.0}
		if l := plan.Loads[0]; len(l) != len(want) {
			t.Errorf("load %v, want %v", l, want)
		} else {
			for k, v := range want {
				if l[k] != v {
					t.Errorf("load %v, want %v", l, want)
				}
			}
		}
	})
	t.Run("no data groups", func(t *testing.T) {
		runSteps(t, logdtest.Start(t, logdtest.Options{}), []step{
			{args: args("cluster moves"), stdoutExact: "no replica moves in progress\n"},
			{args: args("cluster moves -o json"), stdoutExact: "{\n  \"node\": \"node-1\",\n  \"moves\": []\n}\n"},
			{args: args("cluster balance --dry-run"), stdoutExact: "no data groups: nothing to balance\n"},
		})
	})
}

// TestClusterMovesTables: the tables of moves and of a balance plan, as a
// cluster with moves in progress answers them (one node cannot have any).
func TestClusterMovesTables(t *testing.T) {
	tests := []struct {
		name  string
		write func(*globalOpts) error
		want  string
		// stderr, if set, must equal what is written there.
		stderr string
	}{
		{
			name: "moves",
			write: func(o *globalOpts) error {
				return writeMoves(o, client.Moves{Node: "n1", Moves: []client.ReplicaMove{
					{Group: 3, Replicas: []string{"n1", "n3", "n4"}, Added: []string{"n4"}, Removed: []string{"n2"}, Reason: "node n2 drained",
						Age: 12*time.Second + 400*time.Millisecond, Voters: []string{"n1", "n2", "n3"}, VotersFrom: "n1", VotersFromLeader: true,
						RemovedVoters: []string{"n2"}},
					{Group: 7, Replicas: []string{"n4", "n1", "n3"}, Added: []string{"n4"}, Removed: []string{"n2"}, Reason: "balance",
						Age: 95 * time.Second, Voters: []string{"n1", "n2", "n3", "n4"}, VotersFrom: "n3", AddedVoters: []string{"n4"}, RemovedVoters: []string{"n2"}},
					{Group: 9, Replicas: []string{"n1", "n3", "n4"}, Added: []string{"n4"}, Reason: "node n4 joined",
						Age: time.Hour + 2*time.Minute, Voters: []string{"n1", "n3", "n4"}, VotersFrom: "n1", AddedVoters: []string{"n4"}},
					{Group: 12, Replicas: []string{"n3", "n4", "n1"}, Removed: []string{"n5"}, Reason: "node n5 not heard from, node n6 joined",
						Age: 300 * time.Millisecond, VotersError: "no replica of data group 12 answered within 2s"},
				}})
			},
			want: "" +
				"GROUP  ADDED  REMOVED  REASON                                  AGE    VOTERS       STATE\n" +
				"3      n4     n2       node n2 drained                         12s    n1,n2,n3     adding n4; removing n2\n" +
				"7      n4     n2       balance                                 1m35s  n1,n2,n3,n4  removing n2\n" +
				"9      n4     -        node n4 joined                          1h2m   n1,n3,n4     done\n" +
				"12     -      n5       node n5 not heard from, node n6 joined  0s     -            unknown: no replica of data group 12 answered within 2s\n",
		},
		{
			name:  "no moves",
			write: func(o *globalOpts) error { return writeMoves(o, client.Moves{Node: "n1"}) },
			want:  "no replica moves in progress\n",
		},
		{
			name: "balance plan",
			write: func(o *globalOpts) error {
				return writeBalancePlan(o, client.BalancePlan{Node: "n1", Groups: 4, ReplicationFactor: 3, Nodes: []string{"n1", "n2", "n3", "n4"},
					Steps: []client.BalanceStep{
						{Step: 1, Kind: client.BalanceReplica, Group: 2, From: "n1", To: "n4"},
						{Step: 1, Kind: client.BalanceLeader, Group: 3, From: "n1", To: "n4"},
						{Step: 2, Kind: client.BalanceReplica, Group: 4, From: "n2", To: "n4"},
					},
					Loads: []client.NodeLoad{
						{Node: "n1", ReplicasBefore: 4, ReplicasAfter: 3, LeadsBefore: 2, LeadsAfter: 1},
						{Node: "n2", ReplicasBefore: 4, ReplicasAfter: 3, LeadsBefore: 1, LeadsAfter: 1},
						{Node: "n3", ReplicasBefore: 4, ReplicasAfter: 4, LeadsBefore: 1, LeadsAfter: 1},
						{Node: "n4", ReplicasBefore: 0, ReplicasAfter: 2, LeadsBefore: 0, LeadsAfter: 1},
						{Node: "n5", Draining: true},
					},
					InProgress: 1, Truncated: true})
			},
			want: "" +
				"2 replica moves and 1 leadership hand-over in 2 steps\n" +
				"STEP  KIND     GROUP  FROM  TO\n" +
				"1     replica  2      n1    n4\n" +
				"1     leader   3      n1    n4\n" +
				"2     replica  4      n2    n4\n" +
				"\n" +
				"NODE           REPLICAS BEFORE  REPLICAS AFTER  LEADS BEFORE  LEADS AFTER\n" +
				"n1             4                3               2             1\n" +
				"n2             4                3               1             1\n" +
				"n3             4                4               1             1\n" +
				"n4             0                2               0             1\n" +
				"n5 (draining)  0                0               0             0\n",
			stderr: "" +
				"logctl: the plan stops after 2 steps; balancing goes on after them\n" +
				"logctl: 1 move in progress finish first (logctl cluster moves)\n" +
				"logctl: dry run: nothing changed; balancing runs on its own on the meta leader, logd's --max-moves at a time\n",
		},
		{
			name: "balance plan with bytes",
			write: func(o *globalOpts) error {
				return writeBalancePlan(o, client.BalancePlan{Node: "n1", Groups: 3, ReplicationFactor: 1, Nodes: []string{"n1", "n2"},
					Steps: []client.BalanceStep{
						{Step: 1, Kind: client.BalanceReplica, Group: 1, From: "n1", To: "n2"},
						{Step: 1, Kind: client.BalanceReplica, Group: 2, From: "n2", To: "n1"},
					},
					Loads: []client.NodeLoad{
						{Node: "n1", ReplicasBefore: 2, ReplicasAfter: 2, LeadsBefore: 2, LeadsAfter: 2, BytesBefore: 12 << 30, BytesAfter: 7 << 30},
						{Node: "n2", ReplicasBefore: 1, ReplicasAfter: 1, LeadsBefore: 1, LeadsAfter: 1, BytesBefore: 2 << 30, BytesAfter: 7 << 30},
					}})
			},
			want: "" +
				"2 replica moves and 0 leadership hand-overs in 1 step\n" +
				"STEP  KIND     GROUP  FROM  TO\n" +
				"1     replica  1      n1    n2\n" +
				"1     replica  2      n2    n1\n" +
				"\n" +
				"NODE  REPLICAS BEFORE  REPLICAS AFTER  LEADS BEFORE  LEADS AFTER  BYTES BEFORE  BYTES AFTER\n" +
				"n1    2                2               2             2            12.0 GiB      7.0 GiB\n" +
				"n2    1                1               1             1            2.0 GiB       7.0 GiB\n",
		},
		{
			name: "balancing waits",
			write: func(o *globalOpts) error {
				return writeBalancePlan(o, client.BalancePlan{Groups: 1, ReplicationFactor: 3, Nodes: []string{"n1"},
					Blocked: "the meta leader changes the table first (node n2 joined)", Loads: []client.NodeLoad{{Node: "n1", ReplicasBefore: 1, ReplicasAfter: 1, LeadsBefore: 1, LeadsAfter: 1}}})
			},
			want: "" +
				"balancing waits: the meta leader changes the table first (node n2 joined)\n" +
				"\n" +
				"NODE  REPLICAS BEFORE  REPLICAS AFTER  LEADS BEFORE  LEADS AFTER\n" +
				"n1    1                1               1             1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := tt.write(&globalOpts{stdout: &stdout, stderr: &stderr}); err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tt.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), tt.want)
			}
			if tt.stderr != "" && stderr.String() != tt.stderr {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), tt.stderr)
			}
		})
	}
}
