package server

import (
	"fmt"
	"time"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/queue"
)

// Limits of queue calls beyond the replication layer's.
const (
	// DefaultClaimBytes is a claim's max_bytes when the request leaves it 0.
	DefaultClaimBytes = 4 << 20
	// MaxClaimWaitMs caps a claim's long-poll wait.
	MaxClaimWaitMs = 60_000
)

func validateQueueNames(topic, name string) error {
	if err := partition.ValidateTopicName(topic); err != nil {
		return errInvalid("%v", err)
	}
	if err := queue.ValidateName(name); err != nil {
		return errInvalid("%v", err)
	}
	return nil
}

func msDur(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// queueConfigChange applies the set fields of a request's config.
func queueConfigChange(c *logdv1.QueueGroupConfig, cfg *queue.Config) error {
	if c == nil {
		return nil
	}
	maxMs := int64(queue.MaxDelay / time.Millisecond)
	for _, f := range []struct {
		name string
		v    *int64
		note string
	}{
		{"lease_ms", c.LeaseMs, ""}, {"backoff_base_ms", c.BackoffBaseMs, ""}, {"backoff_max_ms", c.BackoffMaxMs, ""},
		{"age_limit_ms", c.AgeLimitMs, " (0: no limit)"},
	} {
		if f.v != nil && (*f.v < 0 || *f.v > maxMs) {
			return errInvalid("queue group config: %s %d outside [0, %d] (%v)%s", f.name, *f.v, maxMs, queue.MaxDelay, f.note)
		}
	}
	if c.LeaseMs != nil {
		cfg.Lease = msDur(*c.LeaseMs)
	}
	if c.MaxDeliveries != nil {
		cfg.MaxDeliveries = int(*c.MaxDeliveries)
	}
	if c.BackoffBaseMs != nil {
		cfg.BackoffBase = msDur(*c.BackoffBaseMs)
	}
	if c.BackoffMaxMs != nil {
		cfg.BackoffMax = msDur(*c.BackoffMaxMs)
	}
	if c.MaxInFlight != nil {
		cfg.MaxInFlight = int(*c.MaxInFlight)
	}
	if c.AgeLimitMs != nil {
		cfg.AgeLimit = msDur(*c.AgeLimitMs)
	}
	if c.DeadLetterTopic != nil {
		cfg.DeadLetterTopic = *c.DeadLetterTopic
	}
	if c.DeadlineHeader != nil {
		cfg.DeadlineHeader = *c.DeadlineHeader
	}
	return nil
}

func queueConfigProto(cfg queue.Config) *logdv1.QueueGroupConfig {
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	i32 := func(n int) *int32 { v := int32(n); return &v }
	str := func(s string) *string { return &s }
	return &logdv1.QueueGroupConfig{
		LeaseMs: ms(cfg.Lease), MaxDeliveries: i32(cfg.MaxDeliveries), BackoffBaseMs: ms(cfg.BackoffBase),
		BackoffMaxMs: ms(cfg.BackoffMax), MaxInFlight: i32(cfg.MaxInFlight), AgeLimitMs: ms(cfg.AgeLimit),
		DeadLetterTopic: str(cfg.DeadLetterTopic), DeadlineHeader: str(cfg.DeadlineHeader),
	}
}

// parsedTokens holds a call's tokens: the well-formed ones to propose, and
// the result of each malformed one.
type parsedTokens struct {
	raw     []string
	tokens  []queue.Token
	index   []int // position in tokens of raw[i], or -1 if malformed
	invalid map[int]string
}

func parseTokens(raw []string) (parsedTokens, error) {
	if len(raw) == 0 || len(raw) > backend.MaxQueueTokens {
		return parsedTokens{}, errInvalid("%d tokens; want 1 to %d", len(raw), backend.MaxQueueTokens)
	}
	pt := parsedTokens{raw: raw, index: make([]int, len(raw)), tokens: make([]queue.Token, 0, len(raw))}
	for i, s := range raw {
		t, err := queue.ParseToken(s)
		if err != nil {
			// Said in the caller's terms, not the queue package's.
			pt.index[i] = -1
			if pt.invalid == nil {
				pt.invalid = map[int]string{}
			}
			pt.invalid[i] = fmt.Sprintf("%q is not a delivery token (a claim answers them, as PARTITION.OFFSET.DELIVERY.MAC)", s)
			continue
		}
		pt.index[i] = len(pt.tokens)
		pt.tokens = append(pt.tokens, t)
	}
	return pt, nil
}

// results turns the applied results into the response's, in request
// order, and fails the call with STALE_TOKEN when no token was accepted
// and at least one was stale (a single stale token is then an error a
// client can act on, like any other refused request).
func (pt parsedTokens) results(rs []queue.TokenResult) ([]*logdv1.TokenResult, error) {
	out := make([]*logdv1.TokenResult, len(pt.raw))
	trs := make([]logdv1.TokenResult, len(pt.raw)) // one allocation for all
	accepted, stale := 0, 0
	var firstStale string
	for i, raw := range pt.raw {
		tr := &trs[i]
		out[i] = tr
		tr.Token = raw
		if pt.index[i] < 0 {
			tr.Error, tr.Message = logdv1.Reason_REASON_INVALID_ARGUMENT, pt.invalid[i]
			continue
		}
		r := rs[pt.index[i]]
		tr.Message, tr.DeadLettered = r.Detail, r.DeadLettered
		tr.AvailableAtMs, tr.LeaseDeadlineMs = nsToMs(r.AvailableAt), nsToMs(r.LeaseUntil)
		switch r.Outcome {
		case queue.TokenStale:
			tr.Error = logdv1.Reason_REASON_STALE_TOKEN
			stale++
			if firstStale == "" {
				firstStale = fmt.Sprintf("token %s: %s", raw, r.Detail)
			}
		case queue.TokenDuplicate:
			tr.Duplicate = true
			accepted++
		default:
			accepted++
		}
	}
	if accepted == 0 && stale > 0 {
		return nil, toConnectError(fmt.Errorf("%w: %s", queue.ErrStaleToken, firstStale))
	}
	if accepted == 0 {
		return nil, errInvalid("no valid token: %s", pt.invalid[0])
	}
	return out, nil
}

func nsToMs(ns int64) int64 {
	if ns == 0 {
		return 0
	}
	return ns / int64(time.Millisecond)
}
