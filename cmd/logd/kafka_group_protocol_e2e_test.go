package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestKafkaKcatGroupHeldByLogd: `kcat -G` (librdkafka's group consumer)
// joins a group that a member of logd's own protocol holds (the Connect
// API's JoinGroup, as `logctl consume --group` joins): logd refuses the
// join with INCONSISTENT_GROUP_PROTOCOL (docs/kafka.md, "logd's protocol
// and Kafka's in one group"), librdkafka hands the refusal to the
// application as a consumer error, and kcat, which takes every consumer
// error as fatal, exits 1 at once having read nothing, the logd member
// still holding the group. Once that member leaves, the same kcat joins
// and reads every record.
func TestKafkaKcatGroupHeldByLogd(t *testing.T) {
	bin := kcat(t)
	const topic, group, n = "held", "held-by-logd", 20
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, kafkaGroupArgs(kaddr)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, topic, 2, nil)
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "k%d:held-%02d\n", i, i)
	}
	file := filepath.Join(t.TempDir(), "records.txt")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runKcat(t, ctx, bin, "-b", kaddr, "-P", "-t", topic, "-K", ":", "-l", file)

	const member = "logd-member"
	if _, err := nd.RPC.JoinGroup(ctx, connect.NewRequest(&logdv1.JoinGroupRequest{Group: group, MemberId: member, Topics: []string{topic}, SessionTimeoutMs: 60_000})); err != nil {
		t.Fatal(err)
	}
	// -e: exit once every assigned partition is read to its end, so a
	// kcat that got into the group ends by itself too.
	args := []string{"-b", kaddr, "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
		"-X", "auto.offset.reset=earliest", "-e", "-f", "%s\n", "-G", group, topic}
	kctx, kcancel := context.WithTimeout(ctx, 30*time.Second)
	defer kcancel()
	cmd := exec.CommandContext(kctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if kctx.Err() != nil {
		t.Fatalf("kcat -G still running after 30s in a group logd's protocol holds:\n%s", e2e.Tail(stderr.String(), 2000))
	}
	const refusal = "Consumer error: JoinGroup failed: Broker: Inconsistent group protocol"
	if err == nil || !strings.Contains(stderr.String(), refusal) || stdout.Len() > 0 {
		t.Fatalf("kcat -G in a group logd's protocol holds: %v, read %d bytes; want it to exit with %q:\n%s",
			err, stdout.Len(), refusal, e2e.Tail(stderr.String(), 2000))
	}
	t.Logf("kcat -G: %v: %s", err, strings.TrimSpace(e2e.Tail(stderr.String(), 300)))
	d, err := nd.RPC.DescribeGroup(ctx, connect.NewRequest(&logdv1.DescribeGroupRequest{Group: group}))
	if err != nil {
		t.Fatal(err)
	}
	if ms := d.Msg.Members; len(ms) != 1 || ms[0].MemberId != member {
		t.Fatalf("after kcat's refusal the group's members are %v; want only %s", ms, member)
	}

	if _, err := nd.RPC.LeaveGroup(ctx, connect.NewRequest(&logdv1.LeaveGroupRequest{Group: group, MemberId: member})); err != nil {
		t.Fatal(err)
	}
	out := runKcat(t, ctx, bin, args...)
	if got := strings.Count(out, "\n"); got != n {
		t.Fatalf("kcat -G in the freed group read %d records, want %d:\n%s", got, n, out)
	}
}
