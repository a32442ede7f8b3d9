package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/queue"
)

// The GROUP-resource settings of share groups logd takes, Kafka 4.2's
// names (its GroupConfig).
const (
	shareAutoOffsetReset = "share.auto.offset.reset"
	shareLockDurationMs  = "share.record.lock.duration.ms"
	shareDeliveryLimit   = "share.delivery.count.limit"
)

// shareConfig is a share group's settings; zero fields take the node's
// defaults.
type shareConfig struct {
	earliest      bool
	lock          time.Duration
	maxDeliveries int
}

// shareConfigKeys lists the settings in DescribeConfigs' order.
var shareConfigKeys = []string{shareAutoOffsetReset, shareDeliveryLimit, shareLockDurationMs}

// values is c as DescribeConfigs shows it, and whether each is a default.
func (c *shareCoordinator) values(cfg shareConfig) map[string][2]string {
	reset := "latest"
	if cfg.earliest {
		reset = "earliest"
	}
	lock := cfg.lock
	if lock == 0 {
		lock = c.opts.lockDuration
	}
	limit := cfg.maxDeliveries
	if limit == 0 {
		limit = queue.DefaultMaxDeliveries
	}
	def := func(b bool) string { return strconv.FormatBool(b) }
	return map[string][2]string{
		shareAutoOffsetReset: {reset, def(!cfg.earliest)},
		shareLockDurationMs:  {strconv.FormatInt(lock.Milliseconds(), 10), def(cfg.lock == 0)},
		shareDeliveryLimit:   {strconv.Itoa(limit), def(cfg.maxDeliveries == 0)},
	}
}

// config returns a group's settings.
func (c *shareCoordinator) config(group string) shareConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.configs[group]
}

// lockFor is the acquisition lock this node knows for a group: its
// setting here, else the node's default. Deliveries are leased for their
// queue group's lease, where a setting is written and which a queue group
// a heartbeat creates gets from this; an answer without records names
// this.
func (c *shareCoordinator) lockFor(group string) time.Duration {
	if l := c.config(group).lock; l > 0 {
		return l
	}
	return c.opts.lockDuration
}

// alterShareGroupConfig applies (or validates) a GROUP resource's changes
// of IncrementalAlterConfigs: SET and DELETE of the settings above. The
// delivery limit and lock are written to the group's queue groups
// (replicated: max deliveries and lease); the reset applies to the queue
// groups a heartbeat creates later, and is kept by the leader's Kafka
// listener only (docs/kafka.md, "Share groups").
func (s *Server) alterShareGroupConfig(ctx context.Context, r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, string) {
	cfg := s.share.config(r.ResourceName)
	touched := map[string]bool{}
	for _, kv := range r.Configs {
		touched[kv.Name] = true
		del := kv.Op == kmsg.IncrementalAlterConfigOpDelete
		if !del && (kv.Op != kmsg.IncrementalAlterConfigOpSet || kv.Value == nil) {
			return errInvalidConfig, fmt.Sprintf("%s: SET with a value, or DELETE", kv.Name)
		}
		v := ""
		if kv.Value != nil {
			v = *kv.Value
		}
		switch kv.Name {
		case shareAutoOffsetReset:
			switch {
			case del || v == "latest":
				cfg.earliest = false
			case v == "earliest":
				cfg.earliest = true
			default:
				return errInvalidConfig, fmt.Sprintf("%s: %q, want earliest or latest (logd has no by_duration)", kv.Name, v)
			}
		case shareLockDurationMs:
			if del {
				cfg.lock = 0
				break
			}
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 1 || time.Duration(ms)*time.Millisecond > queue.MaxLease {
				return errInvalidConfig, fmt.Sprintf("%s: %q, want milliseconds in [1, %d]", kv.Name, v, queue.MaxLease.Milliseconds())
			}
			cfg.lock = time.Duration(ms) * time.Millisecond
		case shareDeliveryLimit:
			if del {
				cfg.maxDeliveries = 0
				break
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > queue.MaxDeliveriesLimit {
				return errInvalidConfig, fmt.Sprintf("%s: %q, want an integer in [1, %d]", kv.Name, v, queue.MaxDeliveriesLimit)
			}
			cfg.maxDeliveries = n
		default:
			return errInvalidConfig, fmt.Sprintf("%s: logd takes %v for a group", kv.Name, shareConfigKeys)
		}
	}
	if validateOnly {
		return errNone, ""
	}
	s.share.mu.Lock()
	s.share.configs[r.ResourceName] = cfg
	s.share.mu.Unlock()
	for _, t := range s.b.Topics() {
		if !slices.Contains(s.b.QueueGroups(t.Name), r.ResourceName) {
			continue
		}
		if !touched[shareDeliveryLimit] && !touched[shareLockDurationMs] {
			break
		}
		_, err := s.b.AlterQueueGroup(ctx, t.Name, r.ResourceName, func(q *queue.Config) {
			if touched[shareDeliveryLimit] {
				q.MaxDeliveries = cmp.Or(cfg.maxDeliveries, queue.DefaultMaxDeliveries)
			}
			if touched[shareLockDurationMs] {
				q.Lease = cmp.Or(cfg.lock, s.share.opts.lockDuration)
			}
		})
		if err != nil && !errors.Is(err, queue.ErrGroupNotFound) {
			return codeFor(err, opAdmin), errorMessage(err)
		}
	}
	return errNone, ""
}

// describeShareGroupConfig lists a GROUP resource's settings.
func (s *Server) describeShareGroupConfig(req *kmsg.DescribeConfigsRequest, r kmsg.DescribeConfigsRequestResource, rr *kmsg.DescribeConfigsResponseResource) {
	vals := s.share.values(s.share.config(r.ResourceName))
	for _, k := range shareConfigKeys {
		if r.ConfigNames != nil && !slices.Contains(r.ConfigNames, k) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = k
		v := vals[k][0]
		c.Value = &v
		c.IsDefault = vals[k][1] == "true"
		c.Source = kmsg.ConfigSourceGroupConfig
		if c.IsDefault {
			c.Source = kmsg.ConfigSourceDefaultConfig
		}
		c.ConfigType = kmsg.ConfigTypeInt
		if k == shareAutoOffsetReset {
			c.ConfigType = kmsg.ConfigTypeString
		}
		rr.Configs = append(rr.Configs, c)
	}
}
