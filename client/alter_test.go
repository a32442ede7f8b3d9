package client_test

import (
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/client"
)

func TestAlterTopic(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	ctx := testContext(t)
	got, err := c.AlterTopic(ctx, "t", map[string]string{"retention.ms": "5", "cleanup.policy": "compact"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config["retention.ms"] != "5" || got.Config["cleanup.policy"] != "compact" {
		t.Fatalf("config after set: %v", got.Config)
	}
	got, err = c.AlterTopic(ctx, "t", nil, []string{"retention.ms"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Config["retention.ms"] != "604800000" || got.Config["cleanup.policy"] != "compact" {
		t.Fatalf("config after reset: %v", got.Config)
	}
	for _, tc := range []struct {
		name  string
		topic string
		set   map[string]string
		reset []string
		want  error
	}{
		{name: "unknown key", topic: "t", set: map[string]string{"bogus": "1"}, want: client.ErrInvalidArgument},
		{name: "set and reset", topic: "t", set: map[string]string{"retention.ms": "1"}, reset: []string{"retention.ms"}, want: client.ErrInvalidArgument},
		{name: "unknown topic", topic: "nope", set: map[string]string{"retention.ms": "1"}, want: client.ErrUnknownTopic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := srv.Calls("AlterTopic")
			if _, err := c.AlterTopic(ctx, tc.topic, tc.set, tc.reset); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if n := srv.Calls("AlterTopic") - calls; n != 1 {
				t.Fatalf("%d calls, want 1 (not retried)", n)
			}
		})
	}
	// An unavailable server is retried: setting values is idempotent.
	srv.FailNext("AlterTopic", connect.NewError(connect.CodeUnavailable, errors.New("down")))
	if _, err := c.AlterTopic(ctx, "t", map[string]string{"retention.ms": "7"}, nil); err != nil {
		t.Fatalf("not retried: %v", err)
	}
}
