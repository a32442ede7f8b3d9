package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// QueueHealth is the backpressure view of one partition of a queue group,
// part of QueuePartitionState. Rates are per second, measured by the
// answering node between describes (0 until two describes at least a
// second apart).
type QueueHealth struct {
	// OldestInFlightAge is how long the longest live lease has run.
	OldestInFlightAge time.Duration `json:"oldest_in_flight_age_ms"`
	// Nacked and Expired count nacks and expired leases since the group
	// began.
	Nacked  int64 `json:"nacked"`
	Expired int64 `json:"expired"`
	// AckedPerSec is the completion rate.
	AckedPerSec        float64 `json:"acked_per_sec"`
	NackedPerSec       float64 `json:"nacked_per_sec"`
	ExpiredPerSec      float64 `json:"expired_per_sec"`
	DeadLetteredPerSec float64 `json:"dead_lettered_per_sec"`
}

func queueHealthFrom(p *logdv1.QueuePartitionState) QueueHealth {
	return QueueHealth{
		OldestInFlightAge: time.Duration(p.OldestInFlightAgeMs) * time.Millisecond,
		Nacked:            p.Nacked, Expired: p.Expired,
		AckedPerSec: p.AckedPerSec, NackedPerSec: p.NackedPerSec, ExpiredPerSec: p.ExpiredPerSec, DeadLetteredPerSec: p.DeadLetteredPerSec,
	}
}

// PauseQueueGroup pauses (paused=true) or resumes a queue group: while
// paused, claims deliver nothing; leases already given keep running and
// every count is kept. It reports whether the state changed. Pausing is
// idempotent, so it is retried on every retryable error.
func (c *Client) PauseQueueGroup(ctx context.Context, topic, group string, paused bool) (changed bool, err error) {
	err = c.do(ctx, "PauseQueueGroup", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.PauseQueueGroup(ctx, connect.NewRequest(&logdv1.PauseQueueGroupRequest{Topic: topic, Group: group, Paused: paused}))
		if err != nil {
			return fromRPC(err)
		}
		changed = resp.Msg.Changed
		return nil
	})
	if err != nil {
		verb := "pause"
		if !paused {
			verb = "resume"
		}
		return false, fmt.Errorf("%s queue group %s/%s: %w", verb, topic, group, err)
	}
	return changed, nil
}
